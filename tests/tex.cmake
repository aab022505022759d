# tests/tex.cmake: every committed .tex table, and freshly written ones, compile inside a two-column
# article without an overfull box (issue 49; skipped without pdflatex).
dg_test(tex_tables COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tex_tables.sh LABELS cpu)
