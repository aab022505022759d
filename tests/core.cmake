# CPU attention, grouping, scoring, selection and metrics against fp64 references and identities.
dg_test(test_attention SOURCES test_attention.c LABELS cpu)
# The replay engine against an independent fp64 implementation of the policy definitions.
dg_test(test_replay SOURCES test_replay.c LABELS cpu)
# The schedule state machine: the dense pass skipped where no run reads it changes no output bit.
dg_test(test_policy_run SOURCES test_policy_run.c LABELS cpu)
