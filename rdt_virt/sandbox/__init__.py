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

"""A sandboxed emulated RDT host: real libvirtd and KVM over emulated resctrl.

The sandbox is a private mount namespace in which

* the emulated resctrl filesystem (:mod:`rdt_virt.emulator`) appears on
  ``/sys/fs/resctrl`` (on a small tmpfs over ``/sys/fs``, since sysfs does
  not allow new directories; the cgroup tree is moved back under it). It is
  mounted in the sandbox directory in the host's namespace and bound there,
  so that tools outside, root or not, use the very same filesystem;
* every CPU's ``cache`` directory in ``/sys/devices/system/cpu`` is replaced
  by one that matches the profile's cache domains, because libvirt takes
  cache ids and CPU lists from there and must agree with resctrl;
* libvirt's configuration and state directories are private copies
  (``/etc/libvirt``, ``/var/lib/libvirt``, ``/var/cache/libvirt``,
  ``/var/log/libvirt``, ``/run/libvirt``), so the host's own libvirt is
  never touched;
* ``virtlogd`` and ``libvirtd`` run with QEMU as root.

Outside the namespace the sandbox is reached through libvirt's socket and
the emulated resctrl, both in the sandbox directory.

``namespace`` runs inside the namespace, ``launcher`` outside; ``guest``
builds tiny KVM guests that burn CPU and touch memory.
"""

from rdt_virt.sandbox.launcher import Sandbox  # noqa: F401
from rdt_virt.sandbox.launcher import SandboxError  # noqa: F401
