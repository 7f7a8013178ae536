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

"""oslo.config options of rdt-virt.

Each option group lives in its own module with ``register_opts`` and
``list_opts``; this package registers them all on the global ``CONF``.
"""

from oslo_config import cfg

from rdt_virt.conf import agent
from rdt_virt.conf import rdt

CONF = cfg.CONF

rdt.register_opts(CONF)
agent.register_opts(CONF)
