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

"""An emulated RDT host: the Linux resctrl filesystem in user space.

No developer or CI machine has RDT hardware, so rdt-virt ships a FUSE
filesystem that behaves like ``/sys/fs/resctrl`` on a chosen hardware
profile. It is an independent implementation of the kernel's semantics (it
does not use :mod:`rdt_virt.resctrl`), so the core library is tested against
the kernel's behaviour rather than against itself.

Layout:

``profiles``  hardware profiles (resources, domains, CPU cache topology)
``boot``      CPU quirks and ``rdt=``: what the kernel enables (pure)
``kernels``   kernel releases as sets of features (pure)
``fromtree``  profiles from captured hosts, and rendered as captures
``kparse``    the kernel's string parsing and formatting rules
``schemata``  schemata validation and new-group defaults (pure)
``model``     groups, tasks, CPUs, modes, CLOSID/RMID allocation (pure)
``rmids``     RMID free list and occupancy-driven limbo (pure)
``assign``    MBM counter assignment, ``mbm_event`` mode (pure)
``features``  the model's counter assignment, io_alloc and BMEC files
``counters``  the CMT/MBM counter model and test injection (pure)
``threads``   thread lookup from ``/proc``
``tree``      the file layout and errno mapping over the model
``fusefs``    the mfusepy operations
``control``   the JSON-lines control socket and its client
``launcher``  :func:`mount`: run the filesystem in a child process

The public entry points are :func:`mount`, :class:`ControlClient` and
:func:`get_profile`; the ``rdt-virt-emulator`` console script wraps them.
"""

from rdt_virt.emulator.control import ControlClient  # noqa: F401
from rdt_virt.emulator.control import ControlError  # noqa: F401
from rdt_virt.emulator.launcher import EmulatorError  # noqa: F401
from rdt_virt.emulator.launcher import EmulatorHandle  # noqa: F401
from rdt_virt.emulator.launcher import mount  # noqa: F401
from rdt_virt.emulator.launcher import unmount  # noqa: F401
from rdt_virt.emulator.profiles import get_profile  # noqa: F401
from rdt_virt.emulator.profiles import PROFILES  # noqa: F401
