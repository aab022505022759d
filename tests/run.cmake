# Batch experiments (dsgap run / merge, experiments/*.ini): the experiment file and its grid, the CLI
# end to end (shards, merge, workers, a killed worker, resume), and a real single-node Slurm job array.
dg_test(test_experiment SOURCES test_experiment.c LABELS cpu)
dg_test(cli_run COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_run.sh LABELS cpu)
dg_test(slurm_array COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/slurm_array.sh LABELS "slow;cpu")
