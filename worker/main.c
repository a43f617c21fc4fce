int main(void) { return 1; } /* placeholder until the worker module lands */
