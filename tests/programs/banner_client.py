#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# banner_client.py - FTP and SMTP clients from Python's standard library,
# for the servers that speak first (run.py ftp-banner, smtp-banner) where
# curl cannot run: under SANITIZE=1 it hangs at start with ASan's runtime
# preloaded, switch or not.
#   banner_client.py ftp-get PORT NAME OUT     ftp-put PORT SRC NAME
#   banner_client.py smtp-send PORT MSGFILE
import ftplib
import smtplib
import sys


def main(argv):
	cmd, port = argv[1], int(argv[2])
	if cmd in ('ftp-get', 'ftp-put'):
		ftp = ftplib.FTP()
		ftp.connect('127.0.0.1', port, timeout=60)
		ftp.login()
		if cmd == 'ftp-get':
			with open(argv[4], 'wb') as f:
				ftp.retrbinary('RETR ' + argv[3], f.write)
		else:
			with open(argv[3], 'rb') as f:
				ftp.storbinary('STOR ' + argv[4], f)
		ftp.quit()
	elif cmd == 'smtp-send':
		with open(argv[3], 'rb') as f:
			msg = f.read()
		with smtplib.SMTP('127.0.0.1', port, timeout=60) as s:
			s.sendmail('a@example.org', ['b@example.org'], msg)
	else:
		sys.exit('unknown command ' + cmd)


if __name__ == '__main__':
	main(sys.argv)
