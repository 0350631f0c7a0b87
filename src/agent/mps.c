/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mps — MPS as NVIDIA's device plugin runs it (sharing.mps, docs/sharing.md): one control daemon for the node
 * (`<mps-control> -f`, CUDA_MPS_PIPE_DIRECTORY=<state-dir>/mps/pipe, CUDA_MPS_LOG_DIRECTORY=<state-dir>/mps/log),
 * its defaults set through the control client — each replicated GPU's pinned device memory limit (memory / N) and
 * the active thread percentage (100 / N) — supervised once a second: a daemon that exited makes the replicated
 * GPUs unusable (reserved: Unhealthy to kubelet, refused at Allocate) until it is started again and configured.
 * The daemon's /dev/shm is <state-dir>/mps/shm, as NVIDIA's /run/nvidia/mps/shm: a tmpfs (64 MiB, nosuid, nodev,
 * noexec) the agent mounts there (reused when one is there after a SIGKILL; unmounted when the agent stops), bound over /dev/shm in the
 * daemon's own mount namespace; Allocate mounts it at /dev/shm of each client, so daemon and clients share it.
 * Without the privilege to mount, a plain directory with a warning (the daemon keeps the agent's /dev/shm).
 * A daemon an agent killed with SIGKILL left serving (its nvidia-cuda-mps-control.pid in the pipe dir, NVIDIA's, names
 * a live process of the control program) is adopted, not started twice: its clients keep running; it is then
 * watched with kill(pid, 0), being no child of ours.
 * Health probe (NVIDIA's mps-control-daemon asks the same): each check of a daemon that lives asks it
 * `get_default_active_thread_percentage` through the control client, spawned as a child whose stdout is a pipe on the
 * loop (never more than one in flight, killed after MPS_PROBE_MS): a daemon that does not answer with a number is
 * hung — its GPUs reserved (Unhealthy) until it answers again, and killed (SIGKILL: a hung daemon may not honour
 * SIGTERM) to be started anew once it has not answered for MPS_HUNG_RESTART_MS.
 * Compute mode (NVIDIA's plugin does the same): the MPS GPUs are set to EXCLUSIVE_PROCESS before the daemon starts,
 * so that only the MPS server's context is on them and processes that are no MPS client are kept off; each GPU's mode
 * before ours is saved in <state-dir>/mps/compute-mode/<uuid> (once: an agent restarted after a SIGKILL finds the
 * mode set and the old one saved) and set back when the agent stops cleanly. An NVML error (no permission: NVML
 * wants root) is logged and the daemon serves anyway.
 * A DRA claim's daemon (mps_daemon_*, dra-link.c) is run the same way: its pipe, log and shm dirs under the claim's
 * dir, the shm dir a tmpfs of its own that is the daemon's /dev/shm (kept over an agent's SIGKILL, unmounted when the
 * daemon is stopped).
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
#include <sched.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/node-internal.h"
#include "nvconfig/nvconfig.h"
#include "nvml/nvml.h"
#include "util/atomic-file.h"
#include "util/log.h"
#include "util/mps-client.h"
#include "util/util.h"

#define MPS_CHECK_MS 1000
#define MPS_READY_MS 5000
#define MPS_SHM_OPTIONS "size=65536k" /* NVIDIA's mount-shm: rw,nosuid,nodev,noexec,relatime,size=65536k */
#define MPS_CHILD_NO_SHM 126          /* the daemon's child could not bind its /dev/shm */
#define MPS_PROBE_MS 2000             /* a daemon that has not answered the probe by then is not serving */
#define MPS_HUNG_RESTART_MS 10000     /* one that has not answered for this long is killed and started anew */
#define MPS_PROBE_COMMAND "get_default_active_thread_percentage\n"

struct mps {
        pid_t pid; /* the daemon, 0: none */
        char pipe[PATH_MAX], log[PATH_MAX], shm[PATH_MAX], fifo[PATH_MAX + 16];
        char modes[PATH_MAX]; /* <state-dir>/mps/compute-mode: each MPS GPU's mode before ours, by UUID */
        bool shm_private;     /* shm is a tmpfs of ours: the daemon gets it as /dev/shm; unmounted at stop */
        bool adopted;         /* pid is a daemon a killed agent left: not our child */
        bool down;            /* the MPS set's GPUs are reserved */
        const char *why;      /* ... for this reason (MPS_NOT_*) */
        bool configured;      /* the daemon took its defaults (configure) */
        unsigned set;         /* the plugin's replica set served by this daemon (plugin_replica_*) */
        unsigned restarts;
        struct loop_timer check;
        /* the probe in flight (probe_pid > 0): the control client asking the daemon probe_of */
        pid_t probe_pid, probe_of;
        struct loop_io probe_io;       /* the client's stdout */
        struct loop_timer probe_timer; /* its deadline */
        char probe_out[64];
        size_t probe_len;
        uint64_t hung_since; /* monotonic ms of the first unanswered probe of this daemon, 0: it answers */
};

extern char **environ;

/* The environment of the daemon and of its clients: the agent's with m's pipe and log dirs. Built before fork: a
 * child of the threaded agent calls nothing but async-signal-safe functions and execve (no setenv: its lock may be
 * held by a thread that is not in the child — a probe forks every second). */
struct child_env {
        char **envp; /* malloc'ed array; its strings are the agent's and the two below */
        char pipe[PATH_MAX + 32], log[PATH_MAX + 32];
};

static int child_env_make(const struct mps *m, struct child_env *ret) {
        size_t n = 0, k = 0;
        while (environ[n])
                n++;
        ret->envp = calloc(n + 3, sizeof *ret->envp);
        if (!ret->envp)
                return -ENOMEM;
        snprintf(ret->pipe, sizeof ret->pipe, "CUDA_MPS_PIPE_DIRECTORY=%s", m->pipe);
        snprintf(ret->log, sizeof ret->log, "CUDA_MPS_LOG_DIRECTORY=%s", m->log);
        for (size_t i = 0; i < n; i++)
                if (!startswith(environ[i], "CUDA_MPS_PIPE_DIRECTORY=") &&
                    !startswith(environ[i], "CUDA_MPS_LOG_DIRECTORY="))
                        ret->envp[k++] = environ[i];
        ret->envp[k++] = ret->pipe;
        ret->envp[k] = ret->log;
        return 0;
}

/* In the child: program with one argument at most (NULL: none), found on PATH, in e's environment, with no signal
 * blocked (the agent's threads block theirs; an exec'ed program keeps the mask it is given). Never returns. */
__attribute__((noreturn)) static void child_exec(const char *program, const char *arg, const struct child_env *e) {
        char *argv[] = { (char *)program, (char *)arg, NULL };
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvpe(program, argv, e->envp);
        _exit(127);
}

/* The daemon started and its control pipe there (bounded wait). 0 or -errno. */
static int spawn(const char *program, struct mps *m) {
        (void)unlink(m->fifo);
        struct child_env env;
        if (child_env_make(m, &env) < 0)
                return -ENOMEM;
        pid_t pid = fork();
        if (pid < 0) {
                free(env.envp);
                return -errno;
        }
        if (pid == 0) {
                /* its own mount namespace, mounts from the agent's still propagating in, the shm dir as /dev/shm */
                if (m->shm_private &&
                    (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
                     mount(m->shm, "/dev/shm", NULL, MS_BIND, NULL) < 0))
                        _exit(MPS_CHILD_NO_SHM);
                child_exec(program, "-f", &env);
        }
        free(env.envp);
        m->pid = pid;
        for (unsigned waited = 0; waited < MPS_READY_MS; waited += 20) {
                struct stat st;
                int status;
                if (stat(m->fifo, &st) == 0 && S_ISFIFO(st.st_mode))
                        return 0;
                if (waitpid(pid, &status, WNOHANG) == pid) {
                        m->pid = 0;
                        if (WIFEXITED(status) && WEXITSTATUS(status) == MPS_CHILD_NO_SHM)
                                log_error("cannot give the MPS control daemon its /dev/shm", "shm=%s", m->shm);
                        return -ECHILD;
                }
                usleep(20000);
        }
        return -ETIMEDOUT;
}

/* The control client against m's daemon, started: program with text on its stdin (written into a fresh pipe before
 * the fork, so no write waits on the child; more than the pipe holds is -E2BIG) and, out_fd >= 0, out_fd as its
 * stdout (blocking in the child, as any program expects). The pid into *ret_pid (the caller reaps it). 0 or -errno. */
static int client_start(const char *program, const struct mps *m, const char *text, size_t len, int out_fd,
                        pid_t *ret_pid) {
        int in[2];
        if (pipe2(in, O_CLOEXEC) < 0)
                return -errno;
        /* the write end only (its own open file description): the child's stdin blocks */
        ssize_t w = fcntl(in[1], F_SETFL, O_NONBLOCK) < 0 ? -1 : write(in[1], text, len);
        int r = w == (ssize_t)len ? 0 : w < 0 && errno != EAGAIN ? -errno : -E2BIG;
        close(in[1]);
        struct child_env env = { 0 };
        if (r == 0)
                r = child_env_make(m, &env);
        pid_t pid = r == 0 ? fork() : -1;
        if (pid == 0) {
                dup2(in[0], STDIN_FILENO);
                if (out_fd >= 0) {
                        dup2(out_fd, STDOUT_FILENO);
                        fcntl(STDOUT_FILENO, F_SETFL, 0);
                }
                child_exec(program, NULL, &env);
        }
        if (pid < 0 && r == 0)
                r = -errno;
        free(env.envp);
        close(in[0]);
        if (r < 0)
                return r;
        *ret_pid = pid;
        return 0;
}

/* `echo TEXT | <program>` against m's daemon (bounded wait). 0 or -errno. */
static int control(const char *program, const struct mps *m, const char *text, size_t len) {
        pid_t pid;
        int r = client_start(program, m, text, len, -1, &pid);
        if (r < 0)
                return r;
        int status = 0;
        for (unsigned waited = 0; waited < MPS_READY_MS; waited += 20) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
                usleep(20000);
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -ETIMEDOUT;
}

/* The defaults through the control client: `echo COMMANDS | <mps-control>`. 0 or -errno. */
static int configure(struct node *n, struct mps *m) {
        const struct devices *d = n->devices;
        unsigned reps = plugin_replica_count(n->plugin, m->set);
        uint64_t gpus = plugin_replica_gpus(n->plugin, m->set); /* the MPS GPUs only, not the time-sliced ones */
        char text[8192];
        size_t at =
                (size_t)snprintf(text, sizeof text, "set_default_active_thread_percentage %u\n", MAX(1u, 100 / reps));
        for (unsigned i = 0; i < devices_count(d) && at < sizeof text; i++)
                if ((gpus >> i) & 1)
                        at += (size_t)snprintf(
                                text + at, sizeof text - at, "set_default_device_pinned_mem_limit %d %" PRIu64 "M\n",
                                devices_info(d, i)->index, devices_info(d, i)->memory_total / reps >> 20);
        if (at >= sizeof text)
                return -E2BIG;
        return control(n->cfg.mps_control, m, text, at);
}

#define MPS_NOT_RUNNING "MPS control daemon not running"
#define MPS_NOT_ANSWERING "MPS control daemon not answering"

/* The MPS GPUs reserved (why: the reason kubelet's view and the status show) or released. */
static void set_down(struct node *n, struct mps *m, bool down, const char *why) {
        if (m->down == down && (!down || m->why == why))
                return;
        m->why = down ? why : NULL;
        devices_lock(n->devices);
        for (unsigned i = 0; i < devices_count(n->devices); i++)
                if ((plugin_replica_gpus(n->plugin, m->set) >> i) & 1) {
                        if (down)
                                devices_reserve(n->devices, i, why);
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
        m->configured = true;
        set_down(n, m, false, NULL);
        return 0;
}

/* The daemon a killed agent left serving this pipe dir: its pid (NVIDIA's pid file there, a live process whose name
 * is the control program's), else 0. */
static pid_t left_behind(const struct node *n, const struct mps *m) {
        char path[PATH_MAX + 40], *text = NULL;
        size_t len;
        snprintf(path, sizeof path, "%s/nvidia-cuda-mps-control.pid", m->pipe);
        if (read_file(path, 64, &text, &len) < 0)
                return 0;
        char *end;
        long pid = strtol(text, &end, 10);
        bool ok = end != text && (*end == '\n' || !*end) && pid > 1 && pid < INT32_MAX;
        free(text);
        if (!ok || kill((pid_t)pid, 0) < 0)
                return 0;
        snprintf(path, sizeof path, "/proc/%ld/comm", pid);
        if (read_file(path, 64, &text, &len) < 0)
                return 0;
        const char *prog = strrchr(n->cfg.mps_control, '/');
        prog = prog ? prog + 1 : n->cfg.mps_control;
        size_t want = MIN(strlen(prog), (size_t)15); /* TASK_COMM_LEN - 1 */
        ok = len >= want && strncmp(text, prog, want) == 0;
        free(text);
        return ok ? (pid_t)pid : 0;
}

/* The daemon is gone (reaped when it is our child). */
static bool exited(struct mps *m, int *status) {
        if (m->adopted)
                return kill(m->pid, 0) < 0 && errno == ESRCH;
        return waitpid(m->pid, status, WNOHANG) == m->pid;
}

/* ---- the probe: `echo get_default_active_thread_percentage | <mps-control>`, answered on the loop ---- */

/* The probe child gone (killed when it still runs) and its fd closed. */
static void probe_end(struct mps *m) {
        if (m->probe_pid <= 0)
                return;
        (void)loop_io_stop(&m->probe_io);
        (void)loop_timer_stop(&m->probe_timer);
        close(m->probe_io.fd);
        if (waitpid(m->probe_pid, NULL, WNOHANG) != m->probe_pid) {
                kill(m->probe_pid, SIGKILL);
                waitpid(m->probe_pid, NULL, 0);
        }
        m->probe_pid = 0;
}

/* The daemon is killed, to be started anew by the next check (SIGKILL: a hung daemon need not honour SIGTERM). */
static void kill_hung(struct mps *m) {
        log_warn("MPS control daemon hung: killed, to be started again", "pid=%d hung_ms=%" PRIu64, (int)m->pid,
                 monotonic_ms() - m->hung_since);
        kill(m->pid, SIGKILL);
        if (!m->adopted)
                waitpid(m->pid, NULL, 0);
        m->pid = 0;
        m->adopted = false;
        m->configured = false;
        m->hung_since = 0;
}

/* What the probe of the daemon m->probe_of learnt: answered (a number on the client's stdout) or not. */
static void probe_result(struct node *n, struct mps *m, bool answered) {
        pid_t of = m->probe_of;
        probe_end(m);
        if (of != m->pid) /* the daemon exited or was replaced meanwhile: on_check has seen to it */
                return;
        if (answered) {
                if (m->hung_since)
                        log_info("MPS control daemon answers again", "pid=%d", (int)m->pid);
                m->hung_since = 0;
                if (!m->configured && configure(n, m) >= 0) { /* an adopted daemon, or one that hung at start */
                        log_info("MPS control daemon serving", "pid=%d pipe=%s", (int)m->pid, m->pipe);
                        m->configured = true;
                }
                if (m->configured)
                        set_down(n, m, false, NULL);
                return;
        }
        uint64_t now = monotonic_ms();
        if (!m->hung_since) {
                m->hung_since = now;
                log_warn("MPS control daemon does not answer: its GPUs are Unhealthy until it does", "pid=%d",
                         (int)m->pid);
        }
        set_down(n, m, true, MPS_NOT_ANSWERING);
        if (now - m->hung_since >= MPS_HUNG_RESTART_MS)
                kill_hung(m);
}

/* The client printed its answer, "10.0": a number and nothing else. */
static bool probe_answered(const struct mps *m) {
        char text[sizeof m->probe_out + 1], *end;
        memcpy(text, m->probe_out, m->probe_len);
        text[m->probe_len] = 0;
        double v = strtod(text, &end);
        while (*end == '\n' || *end == ' ')
                end++;
        return end != text && !*end && v >= 0 && v <= 100;
}

static void on_probe_out(struct loop_io *h, uint32_t events) {
        struct node *n = h->userdata;
        struct mps *m = n->mps;
        (void)events;
        char buf[256];
        ssize_t r = read(h->fd, buf, sizeof buf);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (r > 0) {
                size_t take = MIN((size_t)r, sizeof m->probe_out - m->probe_len);
                memcpy(m->probe_out + m->probe_len, buf, take);
                m->probe_len += take;
                return;
        }
        probe_result(n, m, r == 0 && probe_answered(m)); /* EOF: the client has said all it will */
}

static void on_probe_timeout(struct loop_timer *t) {
        struct node *n = t->userdata;
        probe_result(n, n->mps, false);
}

/* Ask the daemon, without waiting: the answer comes to on_probe_out, or on_probe_timeout. 0 or -errno. */
static int probe_start(struct node *n, struct mps *m) {
        int out[2];
        if (pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        pid_t pid = 0;
        int r = client_start(n->cfg.mps_control, m, MPS_PROBE_COMMAND, strlen(MPS_PROBE_COMMAND), out[1], &pid);
        close(out[1]);
        if (r == 0)
                r = loop_io_start(&n->loop, &m->probe_io, out[0], EPOLLIN, on_probe_out, n);
        if (r < 0) {
                close(out[0]);
                if (pid > 0) {
                        kill(pid, SIGKILL);
                        waitpid(pid, NULL, 0);
                }
                return r;
        }
        m->probe_pid = pid;
        m->probe_of = m->pid;
        m->probe_len = 0;
        return loop_timer_start(&m->probe_timer, MPS_PROBE_MS);
}

static void on_check(struct loop_timer *t) {
        struct node *n = t->userdata;
        struct mps *m = n->mps;
        int status = 0;
        if (m->pid > 0 && exited(m, &status)) {
                log_warn("MPS control daemon exited: its GPUs are Unhealthy until it serves again", "pid=%d status=%d",
                         (int)m->pid, status);
                m->pid = 0;
                m->adopted = false;
                m->configured = false;
                m->hung_since = 0;
        }
        if (m->pid <= 0) {
                set_down(n, m, true, MPS_NOT_RUNNING);
                m->restarts++;
                (void)bring_up(n, m);
        } else if (m->probe_pid <= 0) { /* one probe at a time: a hung one ends at its deadline */
                int r = probe_start(n, m);
                if (r < 0)
                        log_error_errno(r, "cannot probe the MPS control daemon", "program=%s", n->cfg.mps_control);
        }
        (void)loop_timer_start(&m->check, MPS_CHECK_MS);
}

/* The shm dir a tmpfs: ours already (a mount point: another device than its parent's), else mounted now. */
static void shm_setup(struct mps *m, const char *base) {
        struct stat self, parent;
        if (stat(m->shm, &self) == 0 && stat(base, &parent) == 0 && self.st_dev != parent.st_dev) {
                m->shm_private = true; /* kept from before a restart: clients may hold files in it */
                return;
        }
        if (mount("shm", m->shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME, MPS_SHM_OPTIONS) == 0) {
                m->shm_private = true;
                return;
        }
        log_warn("cannot mount the MPS shm tmpfs: the daemon keeps the agent's /dev/shm, its clients get a plain "
                 "directory (a real driver's clients then cannot share memory with it)",
                 "shm=%s errno=%d", m->shm, errno);
}

/* ---- compute mode ---- */

static void mode_path(const struct mps *m, const struct device_info *g, char *buf, size_t len) {
        snprintf(buf, len, "%.4000s/%s", m->modes, g->id);
}

/* GPU g EXCLUSIVE_PROCESS, the mode before saved unless an agent killed before saved it already. */
static void exclusive_on(struct node *n, const struct mps *m, const struct device_info *g) {
        char path[PATH_MAX + 100];
        mode_path(m, g, path, sizeof path);
        struct nvml_error ne = { 0 };
        int mode, r = nvml_device_compute_mode(n->nvml, (unsigned)g->index, &mode, &ne);
        bool saved = r >= 0 && access(path, F_OK) == 0, made = false;
        if (r >= 0 && !saved) {
                char text[16];
                int len = snprintf(text, sizeof text, "%d\n", mode);
                int w = atomic_file_write(path, text, (size_t)len, 0644, 0);
                if (w < 0) {
                        log_warn_errno(w, "cannot save the compute mode of an MPS GPU: it is left as it is", "gpu=%s",
                                       g->id);
                        return;
                }
                made = true;
        }
        if (r >= 0 && mode != NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)
                r = nvml_device_set_compute_mode(n->nvml, (unsigned)g->index, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS, &ne);
        if (r < 0) {
                log_warn("cannot set an MPS GPU's compute mode to EXCLUSIVE_PROCESS: processes that are no MPS client "
                         "are not kept off it",
                         "gpu=%s func=%s nvml=\"%s\"", g->id, ne.func, ne.text);
                if (made)
                        (void)unlink(path); /* nothing of ours to restore */
                return;
        }
        log_info("MPS GPU's compute mode EXCLUSIVE_PROCESS", "gpu=%s before=%d", g->id, saved ? -1 : mode);
}

/* GPU g back to its saved mode (the file then removed). */
static void exclusive_off(struct node *n, const struct mps *m, const struct device_info *g) {
        char path[PATH_MAX + 100], *text = NULL;
        size_t len;
        mode_path(m, g, path, sizeof path);
        if (read_file(path, 16, &text, &len) < 0)
                return; /* not set by us */
        unsigned before;
        text[strcspn(text, "\n")] = 0;
        int r = parse_uint(text, NVML_COMPUTEMODE_COUNT - 1, &before);
        free(text);
        struct nvml_error ne = { .func = "", .text = "bad saved mode" };
        int now = -1;
        if (r >= 0 && (r = nvml_device_compute_mode(n->nvml, (unsigned)g->index, &now, &ne)) >= 0 && now != (int)before)
                r = nvml_device_set_compute_mode(n->nvml, (unsigned)g->index, (int)before, &ne);
        if (r < 0) {
                log_warn("cannot set an MPS GPU's compute mode back", "gpu=%s mode=%u func=%s nvml=\"%s\"", g->id,
                         before, ne.func, ne.text);
                return;
        }
        (void)unlink(path);
        log_info("MPS GPU's compute mode set back", "gpu=%s mode=%u", g->id, before);
}

/* Each MPS GPU's compute mode EXCLUSIVE_PROCESS (on) or back to what it was (off). */
static void compute_modes(struct node *n, const struct mps *m, bool on) {
        if (on && mkdir(m->modes, 0755) < 0 && errno != EEXIST) {
                log_warn_errno(-errno, "cannot keep the MPS GPUs' compute modes: they are left as they are", "dir=%s",
                               m->modes);
                return;
        }
        uint64_t gpus = plugin_replica_gpus(n->plugin, m->set);
        for (unsigned i = 0; i < devices_count(n->devices); i++)
                if ((gpus >> i) & 1)
                        (on ? exclusive_on : exclusive_off)(n, m, devices_info(n->devices, i));
        if (!on)
                (void)rmdir(m->modes); /* empty unless a GPU could not be set back */
}

int node_mps_start(struct node *n) {
        int set = n->nvidia && n->nvidia->mps.sharing == NVCONFIG_SHARING_MPS
                          ? plugin_replica_find(n->plugin, n->nvidia->mps.name)
                          : -1;
        if (set < 0 || !plugin_replica_gpus(n->plugin, (unsigned)set))
                return 0;
        struct mps *m = n->mps = calloc(1, sizeof *m);
        if (!m)
                return log_error_errno(-ENOMEM, "out of memory");
        m->set = (unsigned)set;
        char base[PATH_MAX];
        if ((size_t)snprintf(base, sizeof base, "%.4000s/mps", n->cfg.state_dir) >= sizeof base)
                return log_error_errno(-ENAMETOOLONG, "path too long");
        snprintf(m->pipe, sizeof m->pipe, "%.4000s/" MPS_DIR_PIPE, base);
        snprintf(m->log, sizeof m->log, "%.4000s/" MPS_DIR_LOG, base);
        snprintf(m->shm, sizeof m->shm, "%.4000s/" MPS_DIR_SHM, base);
        snprintf(m->fifo, sizeof m->fifo, "%s/control", m->pipe);
        snprintf(m->modes, sizeof m->modes, "%.4000s/compute-mode", base);
        if ((mkdir(base, 0755) < 0 && errno != EEXIST) || (mkdir(m->pipe, 0755) < 0 && errno != EEXIST) ||
            (mkdir(m->log, 0755) < 0 && errno != EEXIST) || (mkdir(m->shm, 01777) < 0 && errno != EEXIST))
                return log_error_errno(-errno, "cannot create the MPS directories", "dir=%s", base);
        shm_setup(m, base);
        int r = plugin_set_replica_mps(n->plugin, m->set, m->pipe, m->shm);
        if (r >= 0)
                r = loop_timer_init(&n->loop, &m->check, on_check, n);
        if (r >= 0)
                r = loop_timer_init(&n->loop, &m->probe_timer, on_probe_timeout, n);
        if (r < 0)
                return log_error_errno(r, "cannot set up MPS");
        m->down = false;
        set_down(n, m, true, MPS_NOT_RUNNING); /* no replica is Healthy before the daemon serves */
        compute_modes(n, m, true);             /* before the daemon, as NVIDIA's plugin */
        pid_t left = left_behind(n, m);
        if (left > 0) { /* configured again by the first check */
                m->pid = left;
                m->adopted = true;
                log_info("MPS control daemon left running by the agent before: adopted", "pid=%d pipe=%s", (int)left,
                         m->pipe);
        } else
                (void)bring_up(n, m); /* a failure is retried by the check */
        return loop_timer_start(&m->check, MPS_CHECK_MS);
}

/* SIGTERM, then SIGKILL after 2 s; reaped when it is our child (an adopted one is not). */
static void terminate(struct mps *m) {
        if (m->pid <= 0)
                return;
        kill(m->pid, SIGTERM);
        int waited = 0, status;
        while (!exited(m, &status) && waited < 2000) {
                usleep(20000);
                waited += 20;
        }
        if (waited >= 2000) {
                kill(m->pid, SIGKILL);
                if (!m->adopted)
                        waitpid(m->pid, NULL, 0);
        }
        m->pid = 0;
        m->adopted = false;
}

void node_mps_stop(struct node *n) {
        struct mps *m = n->mps;
        if (!m)
                return;
        loop_timer_done(&m->check);
        probe_end(m);
        loop_timer_done(&m->probe_timer);
        terminate(m);
        compute_modes(n, m, false);
        if (m->shm_private) /* the daemon is gone; clients keep their own mounts of it */
                (void)umount2(m->shm, MNT_DETACH);
        free(m);
        n->mps = NULL;
}

/* ---- one daemon for a DRA claim (dra-link.c) ---- */

static int daemon_paths(struct mps *m, const char *dir) {
        if ((size_t)snprintf(m->pipe, sizeof m->pipe, "%.4000s/" MPS_DIR_PIPE, dir) >= sizeof m->pipe ||
            (size_t)snprintf(m->log, sizeof m->log, "%.4000s/" MPS_DIR_LOG, dir) >= sizeof m->log ||
            (size_t)snprintf(m->shm, sizeof m->shm, "%.4000s/" MPS_DIR_SHM, dir) >= sizeof m->shm)
                return -ENAMETOOLONG;
        snprintf(m->fifo, sizeof m->fifo, "%s/control", m->pipe);
        return 0;
}

/* The shm tmpfs of a daemon's dir unmounted, when it is one (a mount point: another device than dir's). */
static void shm_unmount(const struct mps *m, const char *dir) {
        struct stat self, parent;
        if (stat(m->shm, &self) == 0 && stat(dir, &parent) == 0 && self.st_dev != parent.st_dev)
                (void)umount2(m->shm, MNT_DETACH); /* clients keep their own mounts of it */
}

/* `quit` to the daemon serving m's pipe dir, when one does (bounded wait). */
static void quit(const char *program, const struct mps *m) {
        struct stat st;
        if (stat(m->fifo, &st) < 0)
                return;
        (void)control(program, m, "quit\n", 5);
        for (unsigned waited = 0; waited < MPS_READY_MS && access(m->fifo, F_OK) == 0; waited += 20)
                usleep(20000);
}

void mps_daemon_quit(const char *program, const char *dir) {
        struct mps m = { 0 };
        if (daemon_paths(&m, dir) < 0)
                return;
        quit(program, &m);
        shm_unmount(&m, dir);
}

int mps_daemon_start(const char *program, const char *dir, const char *commands, struct mps **ret) {
        struct mps *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        int r = daemon_paths(m, dir);
        if (r == 0 && ((mkdir(m->pipe, 0755) < 0 && errno != EEXIST) || (mkdir(m->log, 0755) < 0 && errno != EEXIST) ||
                       (mkdir(m->shm, 01777) < 0 && errno != EEXIST)))
                r = -errno;
        if (r == 0) {
                quit(program, m);  /* one an earlier agent left serving the pipe dir (its shm tmpfs is kept) */
                shm_setup(m, dir); /* its own /dev/shm, as the device plugin's daemon */
                r = spawn(program, m);
        }
        if (r == 0 && commands[0])
                r = control(program, m, commands, strlen(commands));
        if (r < 0) {
                mps_daemon_stop(m);
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
        if (m->shm_private) /* the daemon is gone; clients keep their own mounts of it */
                (void)umount2(m->shm, MNT_DETACH);
        free(m);
}
