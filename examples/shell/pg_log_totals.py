#!/usr/bin/env python3
"""Where a PostgreSQL server spent its time, from a log written with
`log_min_duration_statement = 0`: each statement's calls (parse, bind and execute
counted apart), total and longest milliseconds, by the statement's first words.
Usage: pg_log_totals.py server.log [top]"""
import re
import sys

LINE = re.compile(r"\S+ \S+ \S+ \[\d+\] LOG:  duration: ([\d.]+) ms  (\w+)[^:]*: ?(.*)")


def main():
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    totals = {}
    statements = []
    for line in open(sys.argv[1], errors="replace"):
        m = LINE.match(line)
        if m:
            statements.append([float(m.group(1)), m.group(2), m.group(3)])
        elif line[:1].isspace() and statements and statements[-1]:
            # A statement's later lines, indented by a tab.
            statements[-1][2] += " " + line.strip()
        else:
            statements.append(None)
    for ms, step, text in filter(None, statements):
        key = (step, re.sub(r"\s+", " ", text)[:90])
        calls, total, most = totals.get(key, (0, 0.0, 0.0))
        totals[key] = (calls + 1, total + ms, max(most, ms))
    print("%10s %8s %8s  %s" % ("total ms", "calls", "max ms", "statement"))
    for (step, text), (calls, total, most) in sorted(
        totals.items(), key=lambda kv: -kv[1][1]
    )[:top]:
        print("%10.0f %8d %8.1f  %s %s" % (total, calls, most, step, text))


main()
