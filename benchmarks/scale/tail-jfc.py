#!/usr/bin/env python3
"""Writes the JFR settings HarnessTail reads: the JDK's profile.jfc, with compilations,
safepoints, VM operations and thread parks recorded whatever their length (no stack traces for
parks and monitors, to keep a park per replay cheap).

    python3 benchmarks/scale/tail-jfc.py "$JAVA_HOME" /tmp/tail.jfc
"""
import re
import sys

java_home, out = sys.argv[1], sys.argv[2]
settings = open(java_home + "/lib/jfr/profile.jfc").read()
ALL = ["jdk.Compilation", "jdk.SafepointBegin", "jdk.SafepointStateSynchronization",
       "jdk.SafepointEnd", "jdk.ExecuteVMOperation", "jdk.Deoptimization"]
NO_STACK = ["jdk.ThreadPark", "jdk.JavaMonitorWait", "jdk.JavaMonitorEnter"]
for name in ALL + NO_STACK:
    block = re.search(r'<event name="%s">.*?</event>' % re.escape(name), settings, re.S).group(0)
    changed = re.sub(r'<setting name="threshold"[^>]*>[^<]*</setting>',
                     '<setting name="threshold">0 ms</setting>', block)
    changed = re.sub(r'<setting name="enabled"[^>]*>[^<]*</setting>',
                     '<setting name="enabled">true</setting>', changed)
    if name in NO_STACK:
        changed = changed.replace('<setting name="stackTrace">true</setting>',
                                  '<setting name="stackTrace">false</setting>')
    settings = settings.replace(block, changed)
open(out, "w").write(settings)
