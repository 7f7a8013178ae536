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

"""Where the Watcher releases rdt-virt supports (14 to 17) differ.

Each shim names the release it exists for: delete it when that release
leaves the support matrix (``doc/source/install/support-matrix.rst``).
"""


def server_uuid(server):
    """The uuid of a server from ``NovaHelper.get_instance_list()``.

    Watcher 16 (2026.1) and later list Watcher's own Server objects, which
    carry ``uuid``; Watcher 14 and 15 (2025.1, 2025.2) list novaclient's,
    which carry it as ``id``. Delete the fallback when 2025.2 leaves the
    matrix. Both carry the embedded ``flavor`` as a dict.
    """
    uuid = getattr(server, 'uuid', None)
    return server.id if uuid is None else uuid
