"""The job shell: one process per job per rank.  It runs the job's tasks as
real subprocesses, forwards their output and exits, and runs plugins (built-ins
in plugins/: doom, output, signal, pmi, instance, pty; user plugins with -o plugins=)."""
