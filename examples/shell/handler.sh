#!/bin/sh
# A shell handler, and the one `backlog init` writes for the demo.
#
# backlog runs it once per record: the record's columns as one JSON object on stdin,
# its id in $BACKLOG_RECORD_ID, the tier's window in $BACKLOG_TIER_WINDOW and its age in
# $BACKLOG_RECORD_AGE_SECONDS. Exit 0 marks the record SUCCESS; any other exit marks it
# ERROR, and it is tried again on a later tick. Handlers must be idempotent: after a
# crash a record that was already delivered can be handed over once more.
record=$(cat)
case "$BACKLOG_RECORD_ID" in
  *3 | *7)
    # One line for every refusal alike, so the dashboard's "group by error" counts
    # them together (an id or a time in it would make a group per record).
    echo "counterpart refused the order: 503 Service Unavailable" >&2
    exit 1
    ;;
esac
echo "delivered record $BACKLOG_RECORD_ID: $record"
