#!/bin/sh
# Nightly retraining for cron: `ebf retrain` on yesterday's partition of a date-partitioned
# Parquet dataset (one ROOT/date=YYYY-MM-DD directory per day).
#
#   retrain_daily.sh REGISTRY ROOT [ebf retrain options, e.g. --target arr_delay]
#
# EBF_RETRAIN_DAY=YYYY-MM-DD runs another day (a backfill); EBF=/path/to/ebf names an ebf
# command that is not on PATH. The report lines of ebf retrain go to stdout.
#
# Exit status, for alerting:
#   0     a healthy night: the challenger was promoted (or version 1 trained), or the champion
#         was kept (ebf retrain's exit 10: the new version failed the gate and is stored, the
#         current version is unchanged), or the run repeated one already made
#   other the job failed, with ebf retrain's status (1 the job failed, 2 usage error or no
#         data for the day, 130/143 interrupted); one line on stderr says so
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 REGISTRY ROOT [ebf retrain options]" >&2
    exit 2
fi
registry=$1
root=${2%/}
shift 2
# GNU date, else BSD/macOS date
day=${EBF_RETRAIN_DAY:-$(date -d yesterday +%F 2>/dev/null || date -v-1d +%F)}
data="$root/date=$day"

# a local dataset without the day's partition: say which days there are (URLs: ebf says)
if [ -d "$root" ] && [ ! -d "$data" ]; then
    days=$(cd "$root" && ls -d date=* 2>/dev/null | sed 's/^date=//' | tail -n 5 | paste -sd ' ' -)
    echo "$(date '+%F %T') ebf retrain $day FAILED: no partition $data (last days under" \
         "$root: ${days:-none}); write the day's data there first" >&2
    exit 2
fi

"${EBF:-ebf}" retrain "$registry" "$data" --quiet "$@"
status=$?
case $status in
    0) ;;
    10) echo "$(date '+%F %T') ebf retrain $day: champion kept (exit 10), not a failure" ;;
    *) echo "$(date '+%F %T') ebf retrain $day FAILED with exit status $status" >&2
       exit $status ;;
esac
exit 0
