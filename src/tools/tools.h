/* The softrdma command's subcommands (src/tools). */
#ifndef SOFTRDMA_TOOLS_H
#define SOFTRDMA_TOOLS_H

/* softrdma run [options] -- program [args]: argv[0] is "run". Returns an exit status (it
 * does not return when the program starts). */
int cmd_run(int argc, char **argv);

#endif
