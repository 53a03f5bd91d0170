# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# smtp_sink.py - a handler for Debian's aiosmtpd (python3 -m aiosmtpd -c
# smtp_sink.Sink DIR): each message's data, as the server received it after
# the SMTP dialogue, goes to DIR/msg.N, so that the test compares it with
# what the client sent.
import os


class Sink:
	def __init__(self, outdir):
		self.outdir = outdir
		self.n = 0

	@classmethod
	def from_cli(cls, parser, *args):
		if len(args) != 1:
			parser.error('smtp_sink.Sink takes one argument: DIR')
		return cls(args[0])

	async def handle_DATA(self, server, session, envelope):
		self.n += 1
		path = os.path.join(self.outdir, 'msg.%d' % self.n)
		with open(path + '.tmp', 'wb') as f:
			f.write(envelope.original_content)
		os.rename(path + '.tmp', path)
		return '250 OK'
