/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mps — MPS as NVIDIA's device plugin runs it (sharing.mps, docs/sharing.md): one control daemon for the node
 * (`<mps-control> -f`, CUDA_MPS_PIPE_DIRECTORY=<state-dir>/mps/pipe, CUDA_MPS_LOG_DIRECTORY=<state-dir>/mps/log),
 * its defaults set through the control client — each replicated GPU's pinned device memory limit (memory / N) and
 * the active thread percentage (100 / N) — supervised once a second: a daemon that exited makes the replicated
 * GPUs unusable (reserved: Unhealthy to kubelet, refused at Allocate) until it is started again and configured.
 * Owns struct mps (node->mps). Must never: leave the daemon running after the agent stops, or list the replicas
 * Healthy while no daemon serves them.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/node-internal.h"
#include "nvconfig/nvconfig.h"
#include "util/log.h"
#include "util/util.h"

#define MPS_CHECK_MS 1000
#define MPS_READY_MS 5000

struct mps {
        pid_t pid; /* the daemon, 0: none */
        char pipe[PATH_MAX], log[PATH_MAX], fifo[PATH_MAX + 16];
        bool down; /* the replicated GPUs are reserved */
        unsigned restarts;
        struct loop_timer check;
};

static void child_env(const struct mps *m) {
        setenv("CUDA_MPS_PIPE_DIRECTORY", m->pipe, 1);
        setenv("CUDA_MPS_LOG_DIRECTORY", m->log, 1);
}

/* The daemon started and its control pipe there (bounded wait). 0 or -errno. */
static int spawn(const char *program, struct mps *m) {
        (void)unlink(m->fifo);
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                child_env(m);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                execlp(program, program, "-f", (char *)NULL);
                _exit(127);
        }
        m->pid = pid;
        for (unsigned waited = 0; waited < MPS_READY_MS; waited += 20) {
                struct stat st;
                if (stat(m->fifo, &st) == 0 && S_ISFIFO(st.st_mode))
                        return 0;
                if (waitpid(pid, NULL, WNOHANG) == pid) {
                        m->pid = 0;
                        return -ECHILD;
                }
                usleep(20000);
        }
        return -ETIMEDOUT;
}

static int control(const char *program, const struct mps *m, const char *text, size_t at);

/* The defaults through the control client: `echo COMMANDS | <mps-control>`. 0 or -errno. */
static int configure(struct node *n, struct mps *m) {
        const struct devices *d = n->devices;
        unsigned reps = plugin_replicas(n->plugin);
        char text[8192];
        size_t at =
                (size_t)snprintf(text, sizeof text, "set_default_active_thread_percentage %u\n", MAX(1u, 100 / reps));
        for (unsigned i = 0; i < devices_count(d) && at < sizeof text; i++)
                if ((plugin_replicated(n->plugin) >> i) & 1)
                        at += (size_t)snprintf(
                                text + at, sizeof text - at, "set_default_device_pinned_mem_limit %d %" PRIu64 "M\n",
                                devices_info(d, i)->index, devices_info(d, i)->memory_total / reps >> 20);
        if (at >= sizeof text)
                return -E2BIG;
        return control(n->cfg.mps_control, m, text, at);
}

/* `echo TEXT | <program>` against m's daemon (bounded wait). 0 or -errno. */
static int control(const char *program, const struct mps *m, const char *text, size_t at) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                close(fds[0]);
                close(fds[1]);
                return -errno;
        }
        if (pid == 0) {
                dup2(fds[0], STDIN_FILENO);
                child_env(m);
                execlp(program, program, (char *)NULL);
                _exit(127);
        }
        close(fds[0]);
        ssize_t w = write(fds[1], text, at);
        close(fds[1]);
        int status = 0;
        for (unsigned waited = 0; waited < MPS_READY_MS; waited += 20) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                        return w == (ssize_t)at && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
                usleep(20000);
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -ETIMEDOUT;
}

static void set_down(struct node *n, struct mps *m, bool down) {
        if (m->down == down)
                return;
        devices_lock(n->devices);
        for (unsigned i = 0; i < devices_count(n->devices); i++)
                if ((plugin_replicated(n->plugin) >> i) & 1) {
                        if (down)
                                devices_reserve(n->devices, i, "MPS control daemon not running");
                        else
                                devices_release(n->devices, i);
                }
        devices_unlock(n->devices);
        m->down = down;
        devices_changed(n->devices);
}

static int bring_up(struct node *n, struct mps *m) {
        int r = spawn(n->cfg.mps_control, m);
        if (r >= 0)
                r = configure(n, m);
        if (r < 0)
                return log_error_errno(r, "MPS control daemon did not start", "program=%s pipe=%s", n->cfg.mps_control,
                                       m->pipe);
        log_info("MPS control daemon serving", "pid=%d pipe=%s log=%s restarts=%u", (int)m->pid, m->pipe, m->log,
                 m->restarts);
        set_down(n, m, false);
        return 0;
}

static void on_check(struct loop_timer *t) {
        struct node *n = t->userdata;
        struct mps *m = n->mps;
        int status;
        if (m->pid > 0 && waitpid(m->pid, &status, WNOHANG) == m->pid) {
                log_warn("MPS control daemon exited: its GPUs are Unhealthy until it serves again", "pid=%d status=%d",
                         (int)m->pid, status);
                m->pid = 0;
        }
        if (m->pid <= 0) {
                set_down(n, m, true);
                m->restarts++;
                (void)bring_up(n, m);
        } else if (m->down && configure(n, m) >= 0) { /* running but not configured yet */
                log_info("MPS control daemon serving", "pid=%d pipe=%s", (int)m->pid, m->pipe);
                set_down(n, m, false);
        }
        (void)loop_timer_start(&m->check, MPS_CHECK_MS);
}

int node_mps_start(struct node *n) {
        if (!n->nvidia || n->nvidia->sharing != NVCONFIG_SHARING_MPS || !plugin_replicated(n->plugin))
                return 0;
        struct mps *m = n->mps = calloc(1, sizeof *m);
        if (!m)
                return log_error_errno(-ENOMEM, "out of memory", "%s", "");
        char base[PATH_MAX];
        if ((size_t)snprintf(base, sizeof base, "%.4000s/mps", n->cfg.state_dir) >= sizeof base)
                return log_error_errno(-ENAMETOOLONG, "path too long", "%s", "");
        snprintf(m->pipe, sizeof m->pipe, "%.4000s/pipe", base);
        snprintf(m->log, sizeof m->log, "%.4000s/log", base);
        snprintf(m->fifo, sizeof m->fifo, "%s/control", m->pipe);
        if ((mkdir(base, 0755) < 0 && errno != EEXIST) || (mkdir(m->pipe, 0755) < 0 && errno != EEXIST) ||
            (mkdir(m->log, 0755) < 0 && errno != EEXIST))
                return log_error_errno(-errno, "cannot create the MPS directories", "dir=%s", base);
        int r = plugin_set_replica_mps(n->plugin, m->pipe);
        if (r >= 0)
                r = loop_timer_init(&n->loop, &m->check, on_check, n);
        if (r < 0)
                return log_error_errno(r, "cannot set up MPS", "%s", "");
        m->down = false;
        set_down(n, m, true); /* no replica is Healthy before the daemon serves */
        (void)bring_up(n, m); /* a failure is retried by the check */
        return loop_timer_start(&m->check, MPS_CHECK_MS);
}

/* SIGTERM, then SIGKILL after 2 s; reaped. */
static void terminate(struct mps *m) {
        if (m->pid <= 0)
                return;
        kill(m->pid, SIGTERM);
        int waited = 0;
        while (waitpid(m->pid, NULL, WNOHANG) != m->pid && waited < 2000) {
                usleep(20000);
                waited += 20;
        }
        if (waited >= 2000) {
                kill(m->pid, SIGKILL);
                waitpid(m->pid, NULL, 0);
        }
        m->pid = 0;
}

void node_mps_stop(struct node *n) {
        struct mps *m = n->mps;
        if (!m)
                return;
        loop_timer_done(&m->check);
        terminate(m);
        free(m);
        n->mps = NULL;
}

/* ---- one daemon for a DRA claim (dra-link.c) ---- */

static int daemon_paths(struct mps *m, const char *dir) {
        if ((size_t)snprintf(m->pipe, sizeof m->pipe, "%.4000s/pipe", dir) >= sizeof m->pipe ||
            (size_t)snprintf(m->log, sizeof m->log, "%.4000s/log", dir) >= sizeof m->log)
                return -ENAMETOOLONG;
        snprintf(m->fifo, sizeof m->fifo, "%s/control", m->pipe);
        return 0;
}

void mps_daemon_quit(const char *program, const char *dir) {
        struct mps m = { 0 };
        struct stat st;
        if (daemon_paths(&m, dir) < 0 || stat(m.fifo, &st) < 0)
                return;
        (void)control(program, &m, "quit\n", 5);
        for (unsigned waited = 0; waited < MPS_READY_MS && access(m.fifo, F_OK) == 0; waited += 20)
                usleep(20000);
}

int mps_daemon_start(const char *program, const char *dir, const char *commands, struct mps **ret) {
        struct mps *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        int r = daemon_paths(m, dir);
        if (r == 0 && ((mkdir(m->pipe, 0755) < 0 && errno != EEXIST) || (mkdir(m->log, 0755) < 0 && errno != EEXIST)))
                r = -errno;
        if (r == 0) {
                mps_daemon_quit(program, dir); /* one an earlier agent left serving the pipe dir */
                r = spawn(program, m);
        }
        if (r == 0 && commands[0])
                r = control(program, m, commands, strlen(commands));
        if (r < 0) {
                terminate(m);
                free(m);
                return r;
        }
        *ret = m;
        return 0;
}

int mps_daemon_check(struct mps *m, const char *program, const char *commands) {
        int status;
        if (m->pid > 0 && waitpid(m->pid, &status, WNOHANG) != m->pid)
                return 0;
        m->pid = 0;
        m->restarts++;
        int r = spawn(program, m);
        if (r == 0 && commands[0])
                r = control(program, m, commands, strlen(commands));
        if (r < 0) {
                terminate(m);
                return r;
        }
        return 1;
}

pid_t mps_daemon_pid(const struct mps *m) {
        return m->pid;
}

void mps_daemon_stop(struct mps *m) {
        if (!m)
                return;
        terminate(m);
        free(m);
}
