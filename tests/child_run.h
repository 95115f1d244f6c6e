/* child_run.h — run this test program again (/proc/self/exe --child ARG) in an environment
 * of its own, for settings read once per process (OMP_NUM_THREADS, KERAC_NUM_THREADS,
 * KERAC_CPU_BALANCE): test_threads_env.c, test_balance.c. Include after cmocka.h. */
#ifndef KC_TEST_CHILD_RUN_H
#define KC_TEST_CHILD_RUN_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The environment minus every variable named in unset (NULL-terminated names), plus set
 * ("NAME=VALUE", NULL-terminated), runs `name --child arg` (arg may be NULL); the child's
 * first line of standard output goes to line (n bytes). The child must exit with 0. */
static inline void child_run(const char *name, const char *arg, const char *const *unset, const char *const *set,
                             char *line, size_t n) {
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        size_t count = 0, k = 0, extra = 0;
        while (environ[count]) count++;
        while (set[extra]) extra++;
        char **env = calloc(count + extra + 1, sizeof *env);
        for (size_t i = 0; env && i < count; i++) {
            bool keep = true;
            for (size_t u = 0; unset[u]; u++) {
                const size_t len = strlen(unset[u]);
                if (!strncmp(environ[i], unset[u], len) && environ[i][len] == '=') keep = false;
            }
            if (keep) env[k++] = environ[i];
        }
        for (size_t i = 0; env && set[i]; i++) env[k++] = (char *)set[i];
        dup2(fd[1], 1);
        close(fd[0]);
        char *argv[] = {(char *)name, "--child", (char *)arg, NULL};
        if (env) execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    close(fd[1]);
    line[0] = '\0';
    FILE *f = fdopen(fd[0], "r");
    assert_non_null(f);
    if (!fgets(line, (int)n, f)) line[0] = '\0';
    fclose(f);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

#endif /* KC_TEST_CHILD_RUN_H */
