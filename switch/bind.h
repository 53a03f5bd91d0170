/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * bind.h - the provider calls that make, find and take a provider
 * connection for one TCP connection, bound to it where the provider can
 * prove who holds the other end (docs/security.md, "Binding").
 */
#ifndef SW_BIND_H
#define SW_BIND_H

#include <stddef.h>
#include <sys/socket.h>

#include "providers.h"
#include "sock.h"

int sw_bind_listen(struct sw_provider *p, int tcp_fd,
		   const struct sockaddr *local, socklen_t len, int backlog,
		   struct sdp_listener **l);
int sw_bind_connect(struct sw_provider *p, int tcp_fd, struct sdp_cq *cq,
		    const struct sockaddr *dst, socklen_t dstlen,
		    const void *priv, size_t privlen, void *ep_context,
		    struct sdp_ep **ep);
int sw_bind_probe(struct sw_provider *p, int tcp_fd,
		  const struct sockaddr *dst, socklen_t dstlen);


#endif /* SW_BIND_H */
