/* A host object using thread-local storage, which the loader refuses. */
__thread int counter;

int bump(void)
{
	return ++counter;
}
