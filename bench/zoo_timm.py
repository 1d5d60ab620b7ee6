"""timm models for the model zoo (bench/zoo.py): image models nobody on this
project wrote, built as their users build them (timm.create_model, no
downloaded weights), at the input size of their default pretrained config."""


def timm_model(name):
    import timm
    return timm.create_model(name, pretrained=False)
