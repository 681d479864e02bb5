/* A second user for the shared-host tests (issue 12): a child process that runs as nobody
 * (uid and gid 65534) and dies with the test. */
#ifndef SOFTRDMA_TEST_NOBODY_H
#define SOFTRDMA_TEST_NOBODY_H

#include <stdbool.h>
#include <sys/types.h>

#define NOBODY_UID 65534

/* Whether another user can be played (the test runs as root); if not, says on stderr that
 * `what` is not tried (the caller skips it). */
bool nobody_can(const char *what);

/* Forks (the test stops if it cannot). In the child (0 returned) the ids are nobody's already
 * (it _exits with 2 if they could not be switched) and it is killed when the test process
 * ends; in the test, the child's pid. */
pid_t nobody_fork(void);

/* Kills and reaps the child. */
void nobody_end(pid_t child);

#endif
