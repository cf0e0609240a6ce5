/* Stand-in for the pyxis SPANK plugin, written for clusterforge's tests (NOT pyxis). It is a real
 * SPANK plugin: built against the installed Slurm's spank.h, it loads in srun and slurmd, and adds
 * one option to srun --help the way pyxis does. */
#include <stddef.h>
#include <slurm/spank.h>

#ifndef PYXIS_VERSION
#error "PYXIS_VERSION is not defined: CPPFLAGS was overridden on make's command line"
#endif

SPANK_PLUGIN(pyxis, 1)

static int set_image(int val, const char *optarg, int remote)
{
	(void)val;
	(void)optarg;
	(void)remote;
	return 0;
}

struct spank_option spank_options[] = {
	{"container-image", "[IMAGE]", "[pyxis] stand-in " PYXIS_VERSION, 1, 0, set_image},
	SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	return 0;
}
