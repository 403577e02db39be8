#!/usr/bin/env bash
# Every flag of resnet_ddp --help has a line in tests/cli/flag_effects.txt naming a test that
# ctest lists and whose source names the flag, and a row in docs/flags.md under the group --help
# gives it; neither lists a flag --help lacks. A flag added to --help alone fails here.
. "$(dirname "$0")/lib.sh"
: "${RDDP_SOURCE_DIR:?set RDDP_SOURCE_DIR to the source tree}"
: "${RDDP_BUILD_DIR:?set RDDP_BUILD_DIR to the build tree}"
table=$RDDP_SOURCE_DIR/tests/cli/flag_effects.txt
docs=$RDDP_SOURCE_DIR/docs/flags.md

"$RDDP_BIN" --help >"$work/help" 2>&1 || failed "resnet_ddp --help"
# "group flag" pairs: a group is a line "NAME:", its flags the lines "  --flag ..." under it.
awk '/^[A-Za-z][A-Za-z ]*:$/ { group = tolower(substr($0, 1, length($0) - 1)); next }
     group != "" && /^  --/ { print group, $1 }' "$work/help" | sort >"$work/help.pairs"
check "--help lists flags in groups" test "$(wc -l <"$work/help.pairs")" -gt 40
cut -d' ' -f2 "$work/help.pairs" | sort >"$work/help.flags"

# set_difference A B: the lines of A that B lacks.
set_difference() { comm -23 "$1" "$2"; }
# same_set WHAT A B: A and B hold the same lines; else says which are missing from each.
same_set() {
  local missing extra
  missing=$(set_difference "$2" "$3" | tr '\n' ' ')
  extra=$(set_difference "$3" "$2" | tr '\n' ' ')
  [ -z "$missing$extra" ] && return 0
  echo "$1: missing [ $missing], not in --help [ $extra]" >"$work/out"
  return 1
}

# The effects table: flag, test, what the test shows.
grep -vE '^[[:space:]]*(#|$)' "$table" >"$work/table"
cut -d' ' -f1 "$work/table" | sort >"$work/table.flags"
check "flag_effects.txt: one line per flag of --help" \
  test -z "$(uniq -d "$work/table.flags")" -a -z "$(awk 'NF < 3' "$work/table")"
check "flag_effects.txt: every flag of --help, and no other" \
  same_set "flag_effects.txt" "$work/help.flags" "$work/table.flags"

# Each test named is one ctest lists, and its sources (the script it runs, or the doctest file
# it selects) name the flag.
(cd "$RDDP_BUILD_DIR" && ctest -N -V) >"$work/ctest" 2>&1 || failed "ctest -N -V in $RDDP_BUILD_DIR"
sources_of() {
  local number command
  number=$(sed -nE "s/^ *Test +#([0-9]+): ${1//./\\.}\$/\1/p" "$work/ctest")
  [ -n "$number" ] || return 1
  command=$(sed -n "s/^$number: Test command: //p" "$work/ctest")
  for word in $(tr -d '"' <<<"$command"); do
    case $word in
      --source-file=*) find "$RDDP_SOURCE_DIR/tests" -name "${word##*/}" ;;
      "$RDDP_BUILD_DIR"/*) ;;  # a program built, whose --help names every flag
      "$RDDP_SOURCE_DIR"/*) [ -f "$word" ] && echo "$word" ;;
    esac
  done
}
unshown=""
while read -r flag test _; do
  sources=$(sources_of "$test") || { unshown+=" $flag ($test is not a ctest test)"; continue; }
  [ -n "$sources" ] || { unshown+=" $flag ($test runs no source of this tree)"; continue; }
  # shellcheck disable=SC2086
  grep -qE -- "$flag([^a-z0-9-]|\$)" $sources ||
    unshown+=" $flag ($test's $(basename $sources) never names it)"
done <"$work/table"
echo "tests named without the flag:$unshown" >"$work/out"
check "every test flag_effects.txt names is one of ctest's, and its source names the flag" \
  test -z "$unshown"

# The reference: a row "| \`--flag ...\` |" under "## GROUP" for each flag, in --help's group.
awk '/^## / { group = tolower(substr($0, 4)); next }
     /^\| `--/ { split($0, cell, "`"); split(cell[2], words, " "); print group, words[1] }' \
  "$docs" |
  sort >"$work/docs.pairs"
check "docs/flags.md: every flag of --help in its group, and no other" \
  same_set "docs/flags.md (group flag)" "$work/help.pairs" "$work/docs.pairs"

# Help texts say what a flag does and its default; the evidence lives in bench/results.
grep -nE "until measured|measured on|[0-9]{4}-[0-9]{2}-[0-9]{2}" "$work/help" >"$work/out"
check "no help text tells a measurement's history" test ! -s "$work/out"
finish
