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

"""Names of resctrl groups that other programs make for rdt-virt's hosts.

libvirt names the group of each ``<cachetune>``/``<memorytune>``
allocation ``<machine name>-<allocation id>``, the machine name being
``qemu-<domain id>-<sanitised domain name>``
(:mod:`rdt_virt.libvirt.machine`). The agent, the CLI and the privileged
daemon all need to recognise such groups: the daemon moves threads out of
them and nothing else of another tool, so the rule lives here, below
everything that uses it, and the privileged code imports nothing above
:mod:`rdt_virt.resctrl`.
"""

import re

_LIBVIRT_GROUP = re.compile(r'^qemu-\d+-[A-Za-z0-9._-]+$')


def is_libvirt_group(name):
    """True if ``name`` looks like a group libvirt made for a domain."""
    return bool(name) and bool(_LIBVIRT_GROUP.match(name))
