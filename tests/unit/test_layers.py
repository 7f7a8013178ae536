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

"""Import directions between rdt-virt's layers.

Each check imports modules in a fresh interpreter (sys.modules of the test
runner already holds everything) and lists what came in with them:

* the privileged daemon's code depends on nothing above
  :mod:`rdt_virt.resctrl`: what it loads runs as root;
* the scheduler plugin does not depend on the compute side
  (``nova_plugin.virt``): both share :mod:`rdt_virt.policy` instead.
"""

import json
import os
import subprocess
import sys

from tests import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

_PROBE = '''
import importlib, json, sys
for name in sys.argv[2:]:
    importlib.import_module(name)
exec(sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules
                        if m.split('.')[0] in ('rdt_virt', 'nova_plugin'))))
'''


def loaded(modules, then=''):
    """Our modules a fresh interpreter holds after importing ``modules``.

    :param then: code to run after the imports (late imports count too).
    """
    out = subprocess.run(
        [sys.executable, '-W', 'ignore', '-c', _PROBE, then] + list(modules),
        cwd=ROOT, check=True, capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=ROOT))
    return json.loads(out.stdout.strip().splitlines()[-1])


def outside(names, allowed):
    return [n for n in names
            if not any(n == a or n.startswith(a + '.') for a in allowed)]


class TestLayers(base.TestCase):

    def test_privileged_code_stays_below_resctrl(self):
        # _is_libvirt is called inside the daemon: a late import in it
        # would only show once it runs.
        names = loaded(['rdt_virt.privsep.resctrl'],
                       "sys.modules['rdt_virt.privsep.resctrl']"
                       "._is_libvirt('qemu-1-instance-1-vcpus_0')")
        self.assertIn('rdt_virt.resctrl.names', names)
        self.assertEqual(['rdt_virt'], outside(names, [
            'rdt_virt.privsep', 'rdt_virt.resctrl', 'rdt_virt.exception',
            'rdt_virt.i18n', 'rdt_virt.conf', 'rdt_virt.concurrency']))

    def test_scheduler_does_not_load_the_compute_side(self):
        names = loaded(['nova_plugin.scheduler.state',
                        'nova_plugin.scheduler.filters',
                        'nova_plugin.scheduler.weights'])
        self.assertIn('rdt_virt.policy.capacity', names)
        self.assertEqual([], [n for n in names
                              if n.startswith('nova_plugin.virt')])
        self.assertEqual([], [n for n in names
                              if n.startswith(('rdt_virt.agent',
                                               'rdt_virt.libvirt'))])
