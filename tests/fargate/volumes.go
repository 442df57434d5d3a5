package fargate

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// volumes prepares a task's volumes as Fargate gives them and returns each
// container's mounts (Engine API mounts), or the reason the task cannot
// start (ECS's wording).
//
//   - A bind volume (no host path on Fargate: the task's own storage) starts
//     empty, owned by root, mode 0755, unless the image of the first
//     container mounting it declares its path as a VOLUME: then it starts
//     with the image's files there, owners and modes kept.
//   - An EFS volume through an access point mounts the access point's root
//     directory, created on first use with its creation info (owner,
//     mode); without creation info a missing root cannot be mounted. The
//     task must reach the file system's mount targets (NFS, 2049).
//     EFS makes every request through the access point as its POSIX user;
//     the replay cannot: it requires the task's user to be that user
//     wherever the access point is mounted read-write, and lists the
//     forcing as not reproduced.
func (c *Cluster) volumes(ctx context.Context, t *Task) (mounts map[string][]map[string]any, reason string, err error) {
	mounts = map[string][]map[string]any{}
	sources := map[string]string{}
	for _, ctr := range t.Def.Containers {
		for _, mp := range ctr.MountPoints {
			vol := t.Def.Volumes[mp.SourceVolume]
			src, ok := sources[vol.Name]
			if !ok {
				var why string
				if vol.EFS != nil {
					src, why, err = c.efsVolume(t, ctr, mp, vol.EFS)
				} else {
					src, err = c.bindVolume(ctx, t, ctr, mp, vol.Name)
				}
				if err != nil || why != "" {
					return nil, why, err
				}
				sources[vol.Name] = src
			}
			mounts[ctr.Name] = append(mounts[ctr.Name], map[string]any{
				"Type": "bind", "Source": src, "Target": mp.ContainerPath, "ReadOnly": mp.ReadOnly,
			})
		}
	}
	return mounts, "", nil
}

func (c *Cluster) taskStorage(t *Task) string { return filepath.Join(c.opt.Work, "tasks", t.ID) }

func (c *Cluster) removeTaskStorage(t *Task) error { return os.RemoveAll(c.taskStorage(t)) }

// bindVolume is a volume on the task's own storage.
func (c *Cluster) bindVolume(ctx context.Context, t *Task, ctr Container, mp MountPoint, name string) (string, error) {
	dir := filepath.Join(c.taskStorage(t), "volumes", name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", err
	}
	img, err := c.e.InspectImage(ctx, c.images[ctr.Image])
	if err != nil {
		return "", fmt.Errorf("image of %s: %w", ctr.Name, err)
	}
	cfg, _ := img["Config"].(map[string]any)
	declared, _ := cfg["Volumes"].(map[string]any)
	if _, ok := declared[mp.ContainerPath]; !ok {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		return dir, errors.Join(os.Chown(dir, 0, 0), os.Chmod(dir, 0o755))
	}
	// Declared: Fargate copies the image's content in, owners and modes kept.
	tmp, err := c.e.CreateContainer(ctx, "fargate-"+t.ID+"-copy-"+name, map[string]any{
		"Image": c.images[ctr.Image], "Labels": labels(t, nil), "Cmd": []string{"none"},
	})
	if err != nil {
		return "", err
	}
	defer c.e.Remove(context.WithoutCancel(ctx), tmp)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(c.e.Archive(ctx, tmp, mp.ContainerPath, pw)) }()
	if err := untar(pr, dir, path.Base(mp.ContainerPath)); err != nil {
		return "", fmt.Errorf("copying %s from %s's image: %w", mp.ContainerPath, ctr.Name, err)
	}
	return dir, nil
}

// untar writes an archive of a directory (its entries under top/) into dir,
// with the owners and modes of its entries.
func untar(r io.Reader, dir, top string) error {
	tr := tar.NewReader(r)
	seen := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(h.Name, top), "/")
		if strings.Contains("/"+rel+"/", "/../") {
			return fmt.Errorf("archive entry %q leaves the directory", h.Name)
		}
		p := filepath.Join(dir, rel)
		mode := os.FileMode(h.Mode).Perm() | modeBits(h.Mode)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o700); err != nil {
				return err
			}
			seen = seen || rel == ""
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
			if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
				return err
			}
			continue
		default:
			continue
		}
		if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	if !seen {
		return fmt.Errorf("the image has no directory %s", top)
	}
	return nil
}

// modeBits are the setuid, setgid and sticky bits of a tar mode.
func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// efsVolume is an access point's root directory on the replay's file system.
func (c *Cluster) efsVolume(t *Task, ctr Container, mp MountPoint, v *EFSVolume) (src, reason string, err error) {
	if !c.m.ReachesEFS(t.At, v.FileSystemID) {
		return "", "ResourceInitializationError: failed to invoke EFS utils commands to set up EFS volumes: stderr: Failed to resolve \"" + v.FileSystemID + ".efs\" - check that your file system ID is correct, and ensure that the VPC has an EFS mount target for this file system ID; mount.nfs4: Connection timed out (the task's security groups do not reach the mount targets' on NFS 2049)", nil
	}
	root := filepath.Join(c.opt.Work, "efs", v.FileSystemID)
	dir := filepath.Join(root, v.RootDirectory)
	if v.AccessPointID != "" {
		ap, ok := c.m.AccessPoints[v.AccessPointID]
		if !ok {
			return "", "", fmt.Errorf("access point %q is not declared", v.AccessPointID)
		}
		if ap.FileSystemID != v.FileSystemID {
			return "", "", fmt.Errorf("access point %s is of file system %s, not %s", ap.Name, ap.FileSystemID, v.FileSystemID)
		}
		dir = filepath.Join(root, ap.Path)
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			if !ap.HasCreationInfo {
				return "", "ResourceInitializationError: failed to invoke EFS utils commands to set up EFS volumes: mount.nfs4: access denied by server while mounting (the access point's root directory " + ap.Path + " does not exist, and it has no creation info)", nil
			}
			perm, _ := strconv.ParseUint(ap.Perms, 8, 32)
			if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
				return "", "", err
			}
			// Tasks start at once (every agent mounts common): EFS makes an
			// access point's root once, whichever task mounts it first, so a
			// directory another task just made is no error (seen in CI:
			// "mkdir …/common: file exists").
			if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
				return "", "", err
			}
			if err := errors.Join(os.Chown(dir, ap.OwnerUID, ap.OwnerGID), os.Chmod(dir, os.FileMode(perm).Perm()|modeBits(int64(perm)))); err != nil {
				return "", "", err
			}
		}
		if !mp.ReadOnly {
			if uid, _, _ := strings.Cut(ctr.User, ":"); uid != strconv.Itoa(ap.UID) {
				return "", "", fmt.Errorf("container %s mounts access point %s read-write as user %q, not as its POSIX user %d: EFS would make every write its user's, and the replay cannot force that", ctr.Name, ap.Name, ctr.User, ap.UID)
			}
		}
	}
	return dir, "", nil
}
