# tests/tex.cmake: every committed .tex table compiles inside a minimal LaTeX document (booktabs),
# and a freshly written one too; skipped without pdflatex (issue 19).
dg_test(tex_tables COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tex_tables.sh LABELS cpu)
