"""Never steps an optimizer: it sleeps, in one long blocking call."""

import time

print("sleeping", flush=True)
time.sleep(3600)
