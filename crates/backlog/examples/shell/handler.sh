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
    echo "counterpart refused record $BACKLOG_RECORD_ID (age ${BACKLOG_RECORD_AGE_SECONDS}s)" >&2
    exit 1
    ;;
esac
echo "delivered record $BACKLOG_RECORD_ID: $record"
