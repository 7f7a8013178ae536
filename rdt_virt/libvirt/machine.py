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

"""libvirt's machine name of a domain, which names its resctrl groups.

libvirt (``virDomainDriverGenerateMachineName``) names a privileged QEMU
domain ``qemu-<domain id>-<name>``: only host name characters of the
domain name are kept, runs of ``.`` and ``-`` collapse, none leads or
trails, and the name stops growing at 64 characters. Its ``<cachetune>``
and ``<memorytune>`` groups are ``<machine name>-<allocation id>``. A
domain gets a new id at every start, so the machine name of a running
domain names its groups and no other's.
"""

_HOSTNAME_CHARS = frozenset('abcdefghijklmnopqrstuvwxyz'
                            'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-')
MAX_LENGTH = 64


def machine_name(domain_id, name, driver='qemu'):
    """The machine name of domain ``name`` running as ``domain_id``."""
    out = '%s-%d-' % (driver, domain_id)
    skip = True
    for char in name:
        if len(out) >= MAX_LENGTH:
            break
        if char in '.-':
            if not skip:
                out += char
                skip = True
            continue
        if char in _HOSTNAME_CHARS:
            out += char
            skip = False
    return out.rstrip('-.')
