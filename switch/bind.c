// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * bind.c - the provider calls of an upgrade that concern one TCP
 * connection: the client's listener, the server's connect to it and the
 * server's look for it. A same-host provider reaches names any local user
 * can create, so it must bind them to the TCP connection (SDP_CAP_TCP_BOUND:
 * each end proves it holds its end of that connection before anything
 * changes hands); one that cannot is not used. A provider that crosses a
 * wire is called as before: the key K proves the server to the client.
 */
#include <errno.h>

#include "bind.h"
#include "log.h"

/* Which call to make: 1 bound, 0 plain, -EPERM not at all. */
static int bound(struct sw_provider *p)
{
	static bool told;

	if (p->mod.info.caps & SDP_CAP_TCP_BOUND)
		return 1;
	if (!(p->mod.info.caps & SDP_CAP_LOCAL_ONLY))
		return 0;
	if (!told) {
		told = true;
		SW_WARN("provider %s reaches this host only but cannot bind its connections to their TCP connection (SDP_CAP_TCP_BOUND): connections stay on TCP; update the module",
			p->mod.name);
	}
	return -EPERM;
}

int sw_bind_listen(struct sw_provider *p, int tcp_fd,
		   const struct sockaddr *local, socklen_t len, int backlog,
		   struct sdp_listener **l)
{
	int b = bound(p);

	if (b < 0)
		return b;
	if (b)
		return p->mod.ops.listen_bound(p->mod.prov, tcp_fd, backlog, l);
	return p->mod.ops.listen(p->mod.prov, local, len, backlog, l);
}

int sw_bind_connect(struct sw_provider *p, int tcp_fd, struct sdp_cq *cq,
		    const struct sockaddr *dst, socklen_t dstlen,
		    const void *priv, size_t privlen, void *ep_context,
		    struct sdp_ep **ep)
{
	int b = bound(p);

	if (b < 0)
		return b;
	if (b)
		return p->mod.ops.connect_bound(p->mod.prov, cq, tcp_fd, priv,
						privlen, ep_context, ep);
	return p->mod.ops.connect(p->mod.prov, cq, dst, dstlen, priv, privlen,
				  ep_context, ep);
}

int sw_bind_probe(struct sw_provider *p, int tcp_fd,
		  const struct sockaddr *dst, socklen_t dstlen)
{
	int b = bound(p);

	if (b < 0)
		return b;
	if (b)
		return p->mod.ops.probe_bound(p->mod.prov, tcp_fd);
	return p->mod.ops.probe(p->mod.prov, dst, dstlen);
}
