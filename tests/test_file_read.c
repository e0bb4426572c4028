/* SPDX-License-Identifier: MIT */
#include "helpers.h"

int main(void)
{
	return th_finish();
}
