"""The signal that ends a user's script once the steps a verb wanted are done."""

from __future__ import annotations


class DoctorStop(BaseException):
    """Raised from the optimizer step hook to end the script once the measured steps are done
    (the doctor's, a script trial's).

    A BaseException, like KeyboardInterrupt, so the script's ``except Exception`` does not catch
    it; its ``finally`` blocks and context managers still run.
    """
