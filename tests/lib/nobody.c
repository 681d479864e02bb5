/* A second user for the shared-host tests (nobody.h). */
#define _GNU_SOURCE
#include "nobody.h"

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

bool nobody_can(const char *what)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "not root: %s is not tried\n", what);
	return false;
}

pid_t nobody_fork(void)
{
	pid_t child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (setresgid(NOBODY_UID, NOBODY_UID, NOBODY_UID) ||
		    setresuid(NOBODY_UID, NOBODY_UID, NOBODY_UID))
			_exit(2);
	}
	return child;
}

void nobody_end(pid_t child)
{
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}
