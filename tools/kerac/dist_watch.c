/* dist_watch.c — the collective watchdog of `kerac train` under mpirun / srun.
 * Open MPI 4.1 has no fault tolerance: a rank that dies is usually noticed by mpirun,
 * which then stops the job, but a rank that stops answering (stopped, swapping, a lost
 * machine under srun) leaves the others blocked in a collective forever. So every
 * blocking collective call is bracketed by cli_watch_begin / cli_watch_end, and a thread
 * ends the process when one lasts longer than --collective-timeout, with a message naming
 * the ranks that did not answer (on this machine: whether the process is gone or stopped,
 * from /proc) and what this rank was doing. The checkpoints are written atomically, so
 * the last one stays loadable: recovery is `kerac train --resume DIR`. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

typedef struct cli_watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool quit, running;
    double since;       /* when the blocking call began (0: none) */
    char call[48];      /* its MPI function */
    char doing[128];    /* what the library said it is for */
    cli_dist *d;
} cli_watch;

/* One rank's state as this machine sees it: "is gone", "is stopped", "did not answer". */
static const char *peer_state(const cli_dist *d, int r, char *buf, size_t n) {
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    const cli_dist_peer *p = &d->peers[r];
    if (strcmp(host, p->host) != 0) {
        snprintf(buf, n, "rank %d (pid %ld on %s) did not answer", r, p->pid, p->host);
        return buf;
    }
    char path[64], stat[512] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", p->pid);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
    if (f) fclose(f);
    stat[got] = 0;
    const char *paren = strrchr(stat, ')');
    char st = paren && paren[1] == ' ' ? paren[2] : '?';
    if (!f || st == 'Z' || st == 'X')
        snprintf(buf, n, "rank %d (pid %ld on %s) is gone (killed or crashed)", r, p->pid, p->host);
    else if (st == 'T' || st == 't')
        snprintf(buf, n, "rank %d (pid %ld on %s) is stopped", r, p->pid, p->host);
    else snprintf(buf, n, "rank %d (pid %ld on %s) runs but did not answer", r, p->pid, p->host);
    return buf;
}

static void expire(cli_watch *w, double waited) {
    cli_dist *d = w->d;
    char msg[2048];
    int o = snprintf(msg, sizeof msg, "kerac: rank %d of %d: no answer from the other ranks within %g s "
                     "(--collective-timeout; waited %.1f s) in %s while %s:", d->rank, d->size, d->timeout, waited,
                     w->call,
                     *w->doing ? w->doing : "starting");
    for (int r = 0; d->peers && r < d->size && o < (int)sizeof msg - 200; r++) { /* peers: gathered at start */
        if (r == d->rank) continue;
        char one[160];
        o += snprintf(msg + o, sizeof msg - (size_t)o, " %s;", peer_state(d, r, one, sizeof one));
    }
    snprintf(msg + o, sizeof msg - (size_t)o, " stopping. The last checkpoint stays loadable: continue with "
             "`kerac train --resume DIR` (with any number of ranks)\n");
    fputs(msg, stderr);
    fflush(stderr);
    fflush(stdout);
    _exit(CLI_EXIT_RUNTIME); /* MPI may not be called from here, nor can the blocked call be left */
}

static void *watch_main(void *arg) {
    cli_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (w->since > 0 && cli_now() - w->since > w->d->timeout) expire(w, cli_now() - w->since);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int cli_watch_start(cli_dist *d) {
    if (d->timeout <= 0) return 0;
    cli_watch *w = calloc(1, sizeof *w);
    if (!w) return cli_error(CLI_EXIT_RUNTIME, "out of memory for the collective watchdog");
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->d = d;
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        free(w);
        return cli_error(CLI_EXIT_RUNTIME, "cannot start the collective watchdog thread");
    }
    w->running = true;
    d->watch = w;
    return 0;
}

void cli_watch_doing(cli_dist *d, const char *what) {
    if (!d->watch) return;
    pthread_mutex_lock(&d->watch->mu);
    snprintf(d->watch->doing, sizeof d->watch->doing, "%s", what);
    pthread_mutex_unlock(&d->watch->mu);
}

void cli_watch_begin(cli_dist *d, const char *call) {
    if (!d->watch) return;
    pthread_mutex_lock(&d->watch->mu);
    snprintf(d->watch->call, sizeof d->watch->call, "%s", call);
    d->watch->since = cli_now();
    pthread_mutex_unlock(&d->watch->mu);
}

void cli_watch_end(cli_dist *d) {
    if (!d->watch) return;
    pthread_mutex_lock(&d->watch->mu);
    d->watch->since = 0;
    pthread_mutex_unlock(&d->watch->mu);
}

void cli_watch_stop(cli_dist *d) {
    cli_watch *w = d->watch;
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->running) pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
    d->watch = NULL;
}
