"""Reads a JUnit XML file with junitparser (a consumer independent of the crate that wrote it)
and prints it as JSON: each suite's name and properties, each case's class name, name and
result (passed, failure, skipped or error) with its message."""
import json
import sys

from junitparser import Error, Failure, JUnitXml, Skipped

xml = JUnitXml.fromfile(sys.argv[1])
suites = []
for suite in xml:
    cases = []
    for case in suite:
        result, message = "passed", None
        for r in case.result:
            kind = {Failure: "failure", Skipped: "skipped", Error: "error"}.get(type(r))
            if kind:
                result, message = kind, r.message
        cases.append({"classname": case.classname, "name": case.name,
                      "result": result, "message": message})
    props = {p.name: p.value for p in suite.properties()}
    suites.append({"name": suite.name, "tests": suite.tests, "failures": suite.failures,
                   "skipped": suite.skipped, "errors": suite.errors,
                   "properties": props, "cases": cases})
print(json.dumps(suites))
