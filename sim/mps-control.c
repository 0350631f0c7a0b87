/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvidia-cuda-mps-control (simulated) — the MPS control daemon and its client as NVIDIA's documents them, for the
 * simulated node (sim/mps.h): the pipe directory from CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps), the log
 * directory from CUDA_MPS_LOG_DIRECTORY (default /var/log/nvidia-mps, control.log in it).
 *
 *   nvidia-cuda-mps-control -d     start the daemon in the background
 *   nvidia-cuda-mps-control -f     run the daemon in the foreground (a supervisor's way)
 *   nvidia-cuda-mps-control        client: each line of stdin is a command to the daemon
 *
 * Commands: set_default_active_thread_percentage N, set_default_device_pinned_mem_limit DEV SIZE (2G, 1024M),
 * get_default_active_thread_percentage (the client prints it, "50.0", once the daemon has handled it), quit.
 * Test hook: the daemon hangs while <pipe dir>/gpuslice-sim-mps.hang names it (mps.h). The daemon writes its state for the simulated libcuda.so.1 after every command (mps.h) and removes it on
 * quit or SIGTERM. Must never leave a state file that names a live daemon it is not.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim/mps.h"
#include "util/atomic-file.h"
#include "util/util.h"

static volatile sig_atomic_t stop;

static void on_term(int sig) {
        (void)sig;
        stop = 1;
}

static const char *dir_of(const char *env, const char *def) {
        const char *v = getenv(env);
        return v && v[0] ? v : def;
}

static void logline(const char *logdir, const char *what) {
        char path[4200];
        snprintf(path, sizeof path, "%s/control.log", logdir);
        FILE *f = fopen(path, "ae");
        if (!f)
                return;
        fprintf(f, "[%ld] %s\n", (long)time(NULL), what);
        fclose(f);
}

static int save(const char *pipe, const struct sim_mps *m) {
        char path[4200], buf[4096];
        snprintf(path, sizeof path, "%s/%s", pipe, SIM_MPS_STATE);
        int n = sim_mps_format(m, buf, sizeof buf);
        return n < 0 ? n : atomic_file_write(path, buf, (size_t)n, 0644, 0);
}

/* The test hook SIM_MPS_HANG names this daemon: an empty file, or its PID. */
static bool hung(const char *pipe) {
        char path[4200], *text = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", pipe, SIM_MPS_HANG);
        if (read_file(path, 64, &text, &len) < 0)
                return false;
        unsigned pid = 0;
        bool me = len == 0 || (sscanf(text, "%u", &pid) == 1 && pid == (unsigned)getpid());
        free(text);
        return me;
}

/* One command line; false for quit. */
static bool command(const char *pipe, const char *logdir, struct sim_mps *m, const char *line) {
        unsigned a, dev;
        char size[32], tail;
        uint64_t v;
        if (!line[0])
                return true;
        logline(logdir, line);
        if (streq(line, "quit"))
                return false;
        m->seq++; /* saved below, also for a command it did not know: the client waits for every line */
        if (sscanf(line, "set_default_active_thread_percentage %u%c", &a, &tail) == 1 && a >= 1 && a <= 100)
                m->thread_percentage = a;
        else if (sscanf(line, "set_default_device_pinned_mem_limit %u %31s%c", &dev, size, &tail) == 2 &&
                 dev < SIM_MPS_GPUS && parse_size(size, &v) == 0)
                m->pinned[dev] = v;
        else if (streq(line, "get_default_active_thread_percentage"))
                ; /* the client reads the answer from the state */
        else if (line[0])
                logline(logdir, "unknown command");
        if (save(pipe, m) < 0)
                logline(logdir, "cannot write the state");
        return true;
}

/* One command line once the daemon is not hung (the test hook: as a hung daemon, it handles nothing); false to
 * stop: quit, or SIGTERM while it hangs. */
static bool handle(const char *pipe, const char *logdir, struct sim_mps *m, const char *line) {
        while (hung(pipe) && !stop)
                usleep(20000);
        return !stop && command(pipe, logdir, m, line);
}

static int daemon_main(bool background) {
        const char *pipe = dir_of("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps");
        const char *logdir = dir_of("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps");
        char fifo[4200], state[4200];
        snprintf(fifo, sizeof fifo, "%s/%s", pipe, SIM_MPS_CONTROL);
        snprintf(state, sizeof state, "%s/%s", pipe, SIM_MPS_STATE);
        (void)mkdir(pipe, 0755);
        (void)mkdir(logdir, 0755);
        struct sim_mps old;
        if (sim_mps_load(pipe, &old) > 0) {
                fprintf(stderr, "An instance of this daemon is already running\n");
                return 1;
        }
        (void)unlink(fifo);
        if (background) {
                pid_t pid = fork();
                if (pid < 0)
                        return 1;
                for (unsigned waited = 0; pid > 0 && waited < 5000; waited += 10) { /* the parent: until it serves */
                        if (access(fifo, F_OK) == 0)
                                return 0;
                        usleep(10000);
                }
                if (pid > 0)
                        return 1;
                setsid();
        }
        /* The control pipe appears last, when the state is there: whoever sees it can talk to the daemon. */
        char tmp[4300];
        snprintf(tmp, sizeof tmp, "%s.new", fifo);
        (void)unlink(tmp);
        struct sim_mps m = { .pid = getpid(), .thread_percentage = 100 };
        char lock[4300];
        snprintf(lock, sizeof lock, "%s/%s", pipe, SIM_MPS_LOCK);
        int lfd = open(lock, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);          /* held until exit: clients see it alive */
        int fd = mkfifo(tmp, 0600) < 0 ? -1 : open(tmp, O_RDWR | O_CLOEXEC); /* also a writer: no EOF */
        char pidfile[4300], pidtext[32];
        snprintf(pidfile, sizeof pidfile, "%s/%s", pipe, SIM_MPS_PIDFILE);
        int pn = snprintf(pidtext, sizeof pidtext, "%d\n", (int)getpid());
        if (lfd < 0 || flock(lfd, LOCK_EX) < 0 || fd < 0 ||
            atomic_file_write(pidfile, pidtext, (size_t)pn, 0644, 0) < 0 || save(pipe, &m) < 0 ||
            rename(tmp, fifo) < 0) {
                fprintf(stderr, "cannot start: %s\n", strerror(errno));
                return 1;
        }
        struct sigaction sa = { .sa_handler = on_term };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        logline(logdir, "Starting control daemon");
        char buf[4096];
        size_t have = 0;
        bool run = true;
        while (run && !stop) {
                ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                have += (size_t)n;
                buf[have] = 0;
                char *nl;
                while (run && (nl = strchr(buf, '\n'))) {
                        *nl = 0;
                        run = handle(pipe, logdir, &m, buf);
                        size_t used = (size_t)(nl + 1 - buf);
                        memmove(buf, nl + 1, have - used + 1);
                        have -= used;
                }
                if (have == sizeof buf - 1)
                        have = 0; /* a line longer than any command: dropped */
        }
        unlink(state);
        unlink(pidfile);
        unlink(fifo);
        logline(logdir, "Exiting control daemon");
        return 0;
}

static int client_main(void) {
        const char *pipe = dir_of("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps");
        char fifo[4200];
        snprintf(fifo, sizeof fifo, "%s/%s", pipe, SIM_MPS_CONTROL);
        struct sim_mps m;
        int fd = sim_mps_load(pipe, &m) > 0 ? open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC) : -1;
        if (fd < 0) {
                fprintf(stderr, "Cannot find MPS control daemon process\n");
                return 1;
        }
        char line[512];
        uint64_t sent = 0;
        bool quit = false, get = false;
        while (fgets(line, sizeof line, stdin)) {
                size_t n = strlen(line);
                if (n && line[n - 1] != '\n' && n + 1 < sizeof line)
                        line[n++] = '\n', line[n] = 0;
                if (write(fd, line, n) != (ssize_t)n) {
                        fprintf(stderr, "cannot send to the daemon: %s\n", strerror(errno));
                        close(fd);
                        return 1;
                }
                quit = quit || strncmp(line, "quit", 4) == 0;
                get = get || streq(line, "get_default_active_thread_percentage\n");
                sent += line[0] != '\n' && !quit;
        }
        close(fd);
        /* like NVIDIA's client, return once the daemon has handled the commands */
        struct sim_mps now;
        for (unsigned waited = 0; !quit && waited < 5000; waited += 10) {
                if (sim_mps_load(pipe, &now) <= 0)
                        return 0;
                if (now.seq >= m.seq + sent) {
                        if (get)
                                printf("%u.0\n", now.thread_percentage);
                        return 0;
                }
                usleep(10000);
        }
        if (!quit)
                fprintf(stderr, "the daemon did not answer\n");
        return quit ? 0 : 1;
}

int main(int argc, char **argv) {
        if (argc == 2 && (streq(argv[1], "-d") || streq(argv[1], "-f")))
                return daemon_main(streq(argv[1], "-d"));
        if (argc == 1)
                return client_main();
        fprintf(stderr, "usage: nvidia-cuda-mps-control [-d | -f]\n");
        return 2;
}
