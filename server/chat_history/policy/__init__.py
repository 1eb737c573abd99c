"""Pure policy: functions on lists of rows. No I/O, no clock, no pygls."""
