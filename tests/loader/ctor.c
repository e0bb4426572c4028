/* A host object with a constructor, which the loader refuses to skip. */
int ready;

__attribute__((constructor)) static void init(void)
{
	ready = 1;
}
