# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Run one fuzz target under atheris (libFuzzer for Python).

    python -m tests.fuzz.run TARGET [libFuzzer options] [corpus dirs]

For example, 20,000 inputs with a 5 s limit per input, growing the
target's corpus::

    python -m tests.fuzz.run schemata -runs=20000 -timeout=5 \\
        tests/fuzz/corpus/schemata

rdt-virt's modules are instrumented for coverage; libFuzzer's ``cov:``
figure counts the edges of that code the inputs have reached. A finding
(an exception the target does not document, an input over the time
limit) stops the run and leaves the input as ``crash-*`` or ``timeout-*``
in the working directory (``-artifact_prefix=`` moves it): copy it to
``tests/fuzz/crashers/TARGET/`` once fixed, so the unit tests replay it.
"""

import os
import sys


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    if len(argv) < 2:
        sys.exit(__doc__)
    import atheris

    with atheris.instrument_imports(include=['rdt_virt']):
        from tests.fuzz import targets
    name = argv.pop(1)
    if name not in targets.TARGETS:
        sys.exit('unknown target %r; known: %s' % (
            name, ', '.join(targets.TARGETS)))
    target = targets.TARGETS[name]

    def one_input(data):
        targets.run_one(target, data)

    if not any(a.startswith('-max_len=') for a in argv):
        argv.insert(1, '-max_len=%d' % target.max_len)
    # libFuzzer's -merge re-runs argv[0] with the options: an executable
    # that runs this target (tools/fuzz.sh writes one) must stand there.
    argv[0] = os.environ.get('RDT_VIRT_FUZZ_ARGV0', argv[0])
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == '__main__':
    main()
