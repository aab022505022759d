# CPU attention, grouping, scoring, selection and metrics against fp64 references and identities.
dg_test(test_attention SOURCES test_attention.c LABELS cpu)
