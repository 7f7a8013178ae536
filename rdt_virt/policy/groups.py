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

"""Names of the resctrl groups rdt-virt owns.

Every name starts with ``[rdt] group_prefix`` (``rdtvirt-`` by default), so
rdt-virt recognises its own groups and leaves everyone else's alone:

* ``<prefix>mb<N>``: the shared control group of instances throttled to N%;
* ``<prefix>i-<uuid>``: the control group of one instance, when rdt-virt
  rather than libvirt applies its bandwidth limit (MBps, AMD units);
* ``<prefix>m-<uuid>``: the monitoring group of one instance.

Instance uuids are validated, so no name is derived from anything a tenant
can choose.
"""

import functools
import re
import uuid as uuid_mod

from oslo_utils import uuidutils

from rdt_virt import exception

_SHARED = re.compile(r'^mb(\d{1,3})$')


def _uuid(value):
    # Canonical form only: braces or upper case must not make a new name.
    if not uuidutils.is_uuid_like(value):
        raise exception.InvalidGroupName(name=value, reason='not a uuid')
    return str(uuid_mod.UUID(str(value)))


def shared_group(prefix, percent):
    """Name of the shared control group for ``percent``."""
    return '%smb%d' % (prefix, int(percent))


def instance_group(prefix, uuid):
    """Name of an instance's own control group."""
    return '%si-%s' % (prefix, _uuid(uuid))


def mon_group(prefix, uuid):
    """Name of an instance's monitoring group."""
    return '%sm-%s' % (prefix, _uuid(uuid))


@functools.lru_cache(maxsize=8192)
def parse(prefix, name):
    """Classify a group name of rdt-virt.

    :returns: ``('shared', N)``, ``('instance', uuid)``, ``('monitor',
        uuid)``, or None when rdt-virt does not own the name.
    """
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix):]
    match = _SHARED.match(rest)
    if match:
        return ('shared', int(match.group(1)))
    kind, _sep, value = rest.partition('-')
    if kind in ('i', 'm') and uuidutils.is_uuid_like(value):
        return ('instance' if kind == 'i' else 'monitor', value)
    return None
