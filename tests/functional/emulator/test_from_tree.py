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

"""The captures of real hosts, mounted through FUSE, read back as captured.

``tests/unit/emulator/test_capture_round_trip.py`` checks every tree on
the emulator's model; this mounts the two real-host captures as
``rdt-virt-emulator mount --from-tree`` does (the kernel left to the
capture) and reads them with plain file I/O.
"""

import os
import shutil
import tempfile

import testscenarios

from rdt_virt.emulator import fromtree
from rdt_virt.emulator import launcher
from tests.functional.emulator import base
from tests.unit.emulator import test_capture_round_trip as unit

CAPTURES = ('epyc-9354-8ccd', 'spr-4410y-mba-mbps')


class FromTreeMountTest(testscenarios.WithScenarios, base.EmulatorTestCase):

    scenarios = [(name, {'capture': os.path.join(unit.CAPTURES, name)})
                 for name in CAPTURES]

    def test_reads_back_through_fuse(self):
        mountpoint = tempfile.mkdtemp(prefix='resctrl-')
        self.addCleanup(shutil.rmtree, mountpoint, True)
        handle = launcher.mount(mountpoint, from_tree=self.capture)
        self.addCleanup(handle.stop)
        spec, _why = fromtree.guess_kernel(self.capture)
        self.assertEqual(spec, handle.client.status()['kernel'])
        res = unit._resctrl_dir(self.capture)
        want = unit._files(res, 'info')
        got = unit._files(mountpoint, 'info')
        self.assertEqual(sorted(want), sorted(got))
        for name in want:
            self.assertEqual(want[name], got[name], name)
        for name in unit.ROOT_FILES:
            with open(os.path.join(res, name)) as f, open(
                    os.path.join(mountpoint, name)) as g:
                self.assertEqual(f.read(), g.read(), name)
        self.assertEqual(sorted(unit._files(res, 'mon_data')),
                         sorted(unit._files(mountpoint, 'mon_data')))
