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

/* softrdma compare [options]: RoCEv2, iWARP and the raw UDP / TCP floors measured in one run
 * (compare.c); argv[0] is "compare". Returns the exit status: 0, 1 (error), 2 (bad usage),
 * 130/143 (SIGINT/SIGTERM). */
int cmd_compare(int argc, char **argv);
/* softrdma compare --scenario incast [options] (scenario.c): the fabrics compared under
 * congestion; argv[0] is "compare". Returns 0, 1 (error, or a row not measured), 2 (bad
 * usage), 130/143 (SIGINT/SIGTERM). */
int scenario_main(int argc, char **argv);

/* softrdma report RESULT.json [-o FILE.html]: the self-contained HTML report of a compare
 * result (report.c); argv[0] is "report". Returns 0, 1 (error) or 2 (bad usage). */
int cmd_report(int argc, char **argv);

/* softrdma switch [options]: hosts in network namespaces around a switch with a bottleneck,
 * ECN marking and PFC (switch_cmd.c); argv[0] is "switch". Returns 0, 1 (error), 2 (bad
 * usage), 130/143 (stopped by SIGINT/SIGTERM before --time). */
int cmd_switch(int argc, char **argv);

#endif
