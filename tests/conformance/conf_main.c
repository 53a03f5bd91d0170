// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * conf_main.c - sdp-conformance: parses the command line, checks that the
 * provider loads, and runs each selected case in its own Check fork with a
 * timeout, printing PASS / FAIL / SKIP per case and the summary line.
 */
#include <check.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conf.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sdp-conformance --provider NAME|PATH [--list] "
		"[--only CASE[,CASE...]] [--options STR]\n"
		"  --provider  provider name (libsdp-NAME.so in the provider "
		"directory) or module path\n"
		"  --list      print each case with what it pins down\n"
		"  --only      run only the named cases\n"
		"  --options   option string passed to the provider's "
		"startup\n");
}

START_TEST(run_case)
{
	int rc = conf_cases[_i].fn();

	ck_assert_msg(rc == 0, "%s", conf_sh->fail[0] ? conf_sh->fail :
		      "case failed without a message");
	ck_assert_msg(!atomic_load(&conf_sh->failed), "%s", conf_sh->fail);
}
END_TEST

/* Runs one case in a Check fork; returns 0 pass, 1 fail, 2 skip. */
static int run_one(int idx)
{
	const struct conf_case *cc = &conf_cases[idx];
	uint64_t t0 = conf_now_us();
	TestResult **tr;
	SRunner *sr;
	Suite *su;
	TCase *tc;
	int res;

	memset(conf_sh, 0, sizeof(*conf_sh));
	su = suite_create("conformance");
	tc = tcase_create(cc->name);
	tcase_set_timeout(tc, cc->timeout);
	tcase_add_loop_test(tc, run_case, idx, idx + 1);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_set_fork_status(sr, CK_FORK);
	fflush(stdout);
	fflush(stderr);
	srunner_run(sr, NULL, NULL, CK_SILENT);
	tr = srunner_results(sr);
	if (atomic_load(&conf_sh->skipped) && !atomic_load(&conf_sh->failed)) {
		printf("SKIP  %-20s %s\n", cc->name, conf_sh->skip);
		res = 2;
	} else if (srunner_ntests_failed(sr) == 0) {
		printf("PASS  %-20s (%.2f s)\n", cc->name,
		       (double)(conf_now_us() - t0) / 1e6);
		res = 0;
	} else {
		printf("FAIL  %-20s %s\n", cc->name,
		       tr && tr[0] ? tr_msg(tr[0]) : "(no result)");
		res = 1;
	}
	free(tr);
	srunner_free(sr);
	fflush(stdout);
	return res;
}

static int selected(const char *only, const char *name)
{
	size_t n = strlen(name);
	const char *p = only;

	if (!only)
		return 1;
	while (p && *p) {
		if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == 0))
			return 1;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return 0;
}

static int check_only(const char *only)
{
	const char *p = only;
	size_t n;
	int i, ok;

	while (p && *p) {
		n = strcspn(p, ",");
		ok = 0;
		for (i = 0; i < conf_ncases; i++)
			if (strlen(conf_cases[i].name) == n &&
			    !strncmp(conf_cases[i].name, p, n))
				ok = 1;
		if (!ok) {
			fprintf(stderr, "sdp-conformance: unknown case '%.*s'; "
				"--list shows the cases\n", (int)n, p);
			return -1;
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "list", no_argument, NULL, 'l' },
		{ "only", required_argument, NULL, 'o' },
		{ "options", required_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int npass = 0, nfail = 0, nskip = 0, list = 0, i, c, r;
	const char *only = NULL;
	struct sdp_module m;

	while ((c = getopt_long(argc, argv, "p:lo:O:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': conf_provider = optarg; break;
		case 'l': list = 1; break;
		case 'o': only = optarg; break;
		case 'O': conf_options = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "sdp-conformance: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}
	if (list) {
		for (i = 0; i < conf_ncases; i++)
			printf("%-20s %s\n", conf_cases[i].name,
			       conf_cases[i].desc);
		return 0;
	}
	if (!conf_provider) {
		fprintf(stderr, "sdp-conformance: --provider NAME|PATH is "
			"required (e.g. --provider shm)\n");
		usage(stderr);
		return 2;
	}
	if (check_only(only) < 0)
		return 2;
	conf_sh = mmap(NULL, sizeof(*conf_sh), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (conf_sh == MAP_FAILED) {
		perror("sdp-conformance: mmap");
		return 2;
	}

	/* Load once here: a provider without a device skips everything. */
	memset(conf_sh, 0, sizeof(*conf_sh));
	{
		pid_t pid = conf_fork();

		if (pid == 0)
			_exit(conf_load(&m) < 0 ? 1 : 0);
		if (pid < 0 || conf_reap(pid, 30000, "provider load") < 0) {
			fprintf(stderr, "sdp-conformance: %s\n",
				conf_sh->fail[0] ? conf_sh->fail :
				"cannot load the provider");
			return 1;
		}
	}
	if (atomic_load(&conf_sh->skipped)) {
		for (i = 0; i < conf_ncases; i++) {
			if (!selected(only, conf_cases[i].name))
				continue;
			printf("SKIP  %-20s %s\n", conf_cases[i].name,
			       conf_sh->skip);
			nskip++;
		}
		printf("%d passed, %d failed, %d skipped\n", 0, 0, nskip);
		return 0;
	}

	printf("provider %s, options '%s'\n", conf_provider,
	       conf_options ? conf_options : "");
	for (i = 0; i < conf_ncases; i++) {
		if (!selected(only, conf_cases[i].name))
			continue;
		r = run_one(i);
		if (r == 0)
			npass++;
		else if (r == 1)
			nfail++;
		else
			nskip++;
	}
	printf("%d passed, %d failed, %d skipped\n", npass, nfail, nskip);
	munmap(conf_sh, sizeof(*conf_sh));
	return nfail ? 1 : 0;
}
