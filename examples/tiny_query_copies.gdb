# The copies (`memmove` calls) of a warm tiny query, with their sizes and
# callers: docs/performance.md, "The whole query at 10^3, and a large
# download priced as measured (2026-12-02)". After 3,000 logged runs
# (past the selector's exploration), every `memmove` prints its size and
# the two innermost frames. Run (a release build has line tables):
#
#   COMPUTEQ_CACHE_DIR=off gdb -batch -x examples/tiny_query_copies.gdb \
#     --args target/release/examples/tiny_query p1 1000 3000 > copies.txt
#   grep -A2 SIZE copies.txt | head -1500 | awk '/SIZE/{s=$2}
#     /^#1/{sub(/ \(.*$/,""); sub(/^#1 +0x[0-9a-f]+ in /,""); print s, $0}' |
#     sort | uniq -c | sort -rn | head -20
#
# The counts of the first lines divided by the number of queries the 1,500
# lines cover (the count of `RunLog::push_numbered`'s copy) are copies per
# query.
set pagination off
set breakpoint pending on
break computeq::runtime::run_log::RunLog::push_numbered
ignore 1 3000
run
delete 1
break __memmove_avx512_unaligned_erms
commands 2
silent
printf "SIZE %d\n", $rdx
bt 2
continue
end
continue
