#!/usr/bin/env bash
# paths.sh: every path of the tree that the .md, .sh, .ini, .c and .h files cite (src/..., kernels/...,
# scripts/..., experiments/..., python/...) exists, so that a move or a rename cannot leave stale
# pointers behind. A citation is such a path at the start of a word (not build/experiments/...,
# $src/..., REV:src/...), up to the first character that cannot be in a path here; a glob or a
# {a,b} list must match. Left out: placeholders (an upper-case letter: experiments/NAME.sh,
# results/RUN), a path followed by "is now" (a rename note), and the two records that keep the
# names of their time (docs/history.md).
#   bash tests/repo/paths.sh [ROOT]     (default: the tree above tests/)
#   bash tests/repo/paths.sh --self-test
set -u
here=$(cd "$(dirname "$0")" && pwd)
cited() { # cited ROOT: "FILE:LINE:PATH" for every missing citation; the count checked on stderr
  local root=$1 n=0 f line p q
  while IFS= read -r f; do
    case $f in docs/history.md) continue ;; esac
    while IFS=: read -r line p; do
      p=${p#"${p%%[a-z]*}"}                # the character before the path
      q=${p%%[!a-z0-9_./*\{\},-]*}          # the path
      while [[ $q == *[.,] ]]; do q=${q%?}; done
      case $q in *[A-Z]*|*\**) continue ;; esac
      case ${p#"$q"} in " is now"*|"\` is now"*) continue ;; esac
      n=$((n + 1))
      case $q in
      *\{*) (cd "$root" && eval "set -- $q" && for x in "$@"; do [ -e "$x" ] || exit 1; done) ;; # a {a,b} list
      *) [ -e "$root/$q" ] ;;
      esac || echo "$f:$line: $q does not exist"
    done < <(grep -noE '(^|[^A-Za-z0-9_./$}~:@-])(src|kernels|scripts|experiments|python)/[A-Za-z0-9_./*{},-]*( is now|` is now)?' \
               "$root/$f")
  done < <(git -C "$root" ls-files -- '*.md' '*.sh' '*.ini' '*.c' '*.h' 2>/dev/null ||
           (cd "$root" && find . \( -path './build*' -o -path './.*' \) -prune -o -type f \( -name '*.md' -o -name '*.sh' \
              -o -name '*.ini' -o -name '*.c' -o -name '*.h' \) -print | sed 's|^\./||'))
  echo "$n citations checked" >&2
}
if [ "${1:-}" = --self-test ]; then
  t=$(mktemp -d /tmp/dsgap-paths-XXXXXX)
  trap 'rm -rf "$t"' EXIT
  mkdir -p "$t/src/util" "$t/experiments" "$t/docs"
  s=src k=kernels; gone=$s/gone.h none=$k/none.cu # not cited by this file
  touch "$t/src/util/util.c" "$t/experiments/a.ini"
  printf '%s\n' 'see src/util/util.c, experiments/*.ini and src/util/{util.c,util.h}.' \
    'experiments/NAME.sh makes build/experiments/x.h5 from $src/metrics.csv; src/old.c is now src/util/util.c' \
    "(\`$gone\`) and git show 1234abc:$gone" > "$t/docs/a.md"
  printf '/* %s */\n' "$none" > "$t/src/util/util.c"
  got=$(cited "$t" 2>/dev/null | sort)
  want="docs/a.md:1: src/util/{util.c,util.h} does not exist
docs/a.md:3: $gone does not exist
src/util/util.c:1: $none does not exist"
  if [ "$got" = "$want" ]; then echo "self-test: the missing paths found, the rest left alone"; exit 0; fi
  printf 'self-test: got\n%s\nwanted\n%s\n' "$got" "$want"
  exit 1
fi
out=$(cited "${1:-$here/../..}")
[ -z "$out" ] && exit 0
echo "$out"
echo "$(echo "$out" | wc -l) cited paths do not exist"
exit 1
