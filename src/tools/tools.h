/* The softrdma command's subcommands (src/tools). */
#ifndef SOFTRDMA_TOOLS_H
#define SOFTRDMA_TOOLS_H

/* softrdma run [options] -- program [args]: argv[0] is "run". Returns an exit status (it
 * does not return when the program starts). */
int cmd_run(int argc, char **argv);

/* softrdma lat|bw [options] [server]: perftest-style latency / bandwidth tests (perf.c);
 * argv[0] is "lat" or "bw". Return the exit status: 0, 1 (error), 2 (bad usage), 130/143
 * (SIGINT/SIGTERM). */
int cmd_lat(int argc, char **argv);
int cmd_bw(int argc, char **argv);

#endif
