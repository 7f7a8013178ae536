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

"""Host load outside any guest, for the reference scenario.

The controller must protect on hosts that do other work too: package
builds, backups, the host's own services. Their CPU time is nobody's
instance, so the agent neither measures nor throttles it; on the emulated
host it shrinks what the guests share, and so what the agent learns as
the pools' capacity.
"""

import subprocess
import sys


class HostLoad(object):
    """CPU hogs outside any guest, which the agent does not manage.

    Each is a process of its own that spins on a CPU, as a package build
    or a backup would on a real host: it takes CPU time from the guests
    in every phase it runs, and nothing rdt-virt does throttles it.

    :param count: how many; 0 runs none.
    """

    def __init__(self, count):
        self.count = count
        self.procs = []

    def __enter__(self):
        for _i in range(self.count):
            self.procs.append(subprocess.Popen(
                [sys.executable, '-c', 'while True:\n    pass\n'],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
            proc.wait()
        self.procs = []
        return False
