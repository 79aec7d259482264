"""Small pure helpers shared by every component: idsets, durations, tree math, job ids."""
