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

"""``rdt-virt-scenario``: the reference scenario on an emulated RDT host.

::

    rdt-virt-scenario [--dir DIR] [--host-load N]
    rdt-virt-scenario --summarize DIR [DIR ...]

Starts a sandbox with the emulated reference host, runs rdt-virt-agent
against it and measures a protected guest's work rate alone, with seven
noisy neighbours, with the neighbours at ``hw:mem_bw=10`` under each
bandwidth strategy, and with the neighbours at ``hw:rdt_priority=low`` and
the protected guest at ``high`` while the agent's controller protects it,
releases the neighbours when it is suspended and protects it again when it
resumes (see :mod:`rdt_virt.sandbox.scenario`). The results
(``results.json``, the controller phases' ``timeline.json``, the chart
``scenario.png``, the guests' serial output and the agent's log) stay in
DIR, by default a new directory under /tmp; with ``--host-load N``,
phases 5-7 run beside N processes that spin on a CPU outside any guest
(the agent does not manage them), as other work would on a real host. The
sandbox's own files are removed. Needs root, /dev/kvm, /dev/fuse, libvirt
and QEMU.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

from rdt_virt.cmd import output
from rdt_virt.sandbox import launcher
from rdt_virt.sandbox import report
from rdt_virt.sandbox import scenario


@output.quiet
def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='rdt-virt-scenario',
        description='The reference scenario on an emulated RDT host.')
    parser.add_argument('--dir', help='working and output directory '
                        '(default: a new one under /tmp)')
    parser.add_argument('--host-load', type=int, default=0, metavar='N',
                        help='run phases 5-7 beside N CPU hogs outside '
                        'any guest (default: 0)')
    parser.add_argument('--summarize', nargs='+', metavar='DIR',
                        help='print the controller\'s figures of earlier '
                        'runs (their output directories) and their mean, '
                        'and run nothing')
    args = parser.parse_args(argv)
    if args.summarize:
        return _summarize(args.summarize)
    reasons = launcher.missing_prerequisites()
    if reasons:
        print('rdt-virt-scenario: %s' % '; '.join(reasons), file=sys.stderr)
        return 2
    # Short: libvirt's socket path lives below it (108 bytes at most).
    directory = args.dir or tempfile.mkdtemp(prefix='rdt-scenario-',
                                             dir='/tmp')
    try:
        scenario.Scenario(directory, host_load=max(0, args.host_load)).run()
    except (launcher.SandboxError, RuntimeError) as e:
        print('rdt-virt-scenario: %s' % e, file=sys.stderr)
        return 1
    finally:
        # The sandbox's private libvirt and namespace files are of no use
        # once it stopped; the results stay.
        shutil.rmtree(os.path.join(directory, 'sandbox'), ignore_errors=True)
    print('Output directory: %s' % directory)
    return 0


def _summarize(directories):
    runs = []
    for directory in directories:
        path = os.path.join(directory, 'results.json')
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, ValueError) as e:
            print('rdt-virt-scenario: %s: %s' % (path, e), file=sys.stderr)
            return 2
    print(report.runs_table(runs), end='')
    return 0


if __name__ == '__main__':
    sys.exit(main())
