/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubewatch — inotify on the plugin dir: kubelet.sock created (kubelet restarted: register
 * again, without the old backoff) and our own sockets removed (kubelet wiped the dir: serve
 * again). kubelet removes the sockets and creates kubelet.sock in quick succession: events are
 * gathered until the dir has been quiet for SETTLE_MS, then acted on once.
 * Must never: act on another program's socket, or block the loop.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "agent/node-internal.h"
#include "util/log.h"
#include "util/util.h"

#define SETTLE_MS 20

static void on_inotify(struct loop_io *io, uint32_t events) {
        (void)events;
        struct node *n = io->userdata;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool any = false;
        for (;;) {
                ssize_t len = read(n->inofd, buf, sizeof buf);
                if (len <= 0)
                        break;
                for (char *ptr = buf; ptr < buf + len;) {
                        const struct inotify_event *ev = (const struct inotify_event *)ptr;
                        ptr += sizeof *ev + ev->len;
                        if (ev->len == 0)
                                continue;
                        if (streq(ev->name, KUBELET_SOCKET) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
                                log_info("kubelet socket created, registering again");
                                n->pending_register = any = true;
                        } else if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
                                for (unsigned k = 0; k < n->n_ep; k++)
                                        if (streq(ev->name, n->ep[k].name) && !file_exists(n->ep[k].socket_path)) {
                                                log_info("plugin socket removed, serving again", "socket=%s",
                                                         n->ep[k].socket_path);
                                                n->pending_restart = any = true;
                                        }
                        }
                }
        }
        if (any)
                (void)loop_timer_start(&n->inotify_settle, SETTLE_MS); /* re-armed by each burst */
}

static void on_settled(struct loop_timer *t) {
        struct node *n = t->userdata;
        bool reg = n->pending_register;
        n->pending_register = n->pending_restart = false;
        for (unsigned k = 0; k < n->n_ep; k++) {
                if (reg)
                        n->ep[k].backoff_ms = 0; /* a new kubelet: no old backoff (serve_and_register resets it) */
                serve_and_register(n, &n->ep[k], !file_exists(n->ep[k].socket_path));
        }
}

int kubewatch_start(struct node *n) {
        n->inofd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (n->inofd < 0)
                return log_error_errno(-errno, "inotify_init1 failed");
        if (inotify_add_watch(n->inofd, n->cfg.plugin_dir, IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) < 0)
                return log_error_errno(-errno, "cannot watch the plugin dir", "dir=%s", n->cfg.plugin_dir);
        int r = loop_timer_init(&n->loop, &n->inotify_settle, on_settled, n);
        if (r >= 0)
                r = loop_io_start(&n->loop, &n->inotify, n->inofd, EPOLLIN, on_inotify, n);
        if (r < 0)
                return log_error_errno(r, "cannot watch inotify");
        return 0;
}

void kubewatch_stop(struct node *n) {
        (void)loop_io_stop(&n->inotify);
        loop_timer_done(&n->inotify_settle);
        if (n->inofd >= 0)
                close(n->inofd);
        n->inofd = -1;
}
